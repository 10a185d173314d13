"""Host keys as a machine's guest environment publishes them: guest attributes in namespace
`hostkeys/`, one entry per key type, read through an authenticated channel (Compute's
getGuestAttributes on GCP, the metadata server's controller side on the local stack), never
learned over the network they protect. Every realizer waits for them here, the same way."""

from __future__ import annotations

from typing import Any, Callable

from infra.errors import ProvisionError
from infra.retry import on_results

NAMESPACE = "hostkeys"
TIMEOUT_SECONDS = 600.0
POLL_SECONDS = 5.0


def key_lines(items: Any) -> list[str]:
    """`<type> <base64>` lines from guest attribute items (the API's objects or their JSON)."""
    def field(item: Any, name: str) -> str:
        return str(item[name] if isinstance(item, dict) else getattr(item, name))

    return [f"{field(i, 'key')} {field(i, 'value')}" for i in items
            if field(i, "namespace") in ("", NAMESPACE)]


def wait_for_host_keys(names: list[str], look: Callable[[list[str]], dict[str, list[str]]],
                       progress: Callable[[str], None], *, timeout: float = TIMEOUT_SECONDS,
                       poll: float = POLL_SECONDS) -> dict[str, list[str]]:
    """Keys per machine name. `look(missing)` reads what is published for the machines still
    without keys; it is asked again every `poll` seconds until all have some, or `timeout`."""
    found: dict[str, list[str]] = {}

    def missing_after_a_look() -> list[str]:
        found.update({name: lines for name, lines in look([n for n in names if not found.get(n)]).items()
                      if lines})
        return [n for n in names if not found.get(n)]

    def waiting(state: Any) -> None:
        progress(f"waiting for host keys of {len(state.outcome.result())} node(s)")

    missing = on_results(bool, within=timeout, fixed=poll, before_sleep=waiting)(missing_after_a_look)
    if missing:
        raise ProvisionError(f"no host keys published by {', '.join(missing)} after "
                             f"{timeout:.0f} s (is the guest environment installed?)")
    return found
