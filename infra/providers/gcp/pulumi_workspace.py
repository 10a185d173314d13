"""How trainctl hands a stack to the Pulumi program: the Automation API stack of this project,
the environment the program reads besides its stack file (the validated spec, the nodes' SSH key,
the expiry written into labels), and the stack's record (gcp.json) of what `up` handed it, which
`repair` and `down` hand the program again.

The validated ClusterSpec travels as TRAINCTL_SPEC_JSON, so ephemeral stacks (one per
experiment) need no config file and the program never re-reads raw config.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from namespace_nodes import keys
from infra.providers.stack_home import state_dir
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import project_root

SPEC_ENV = "TRAINCTL_SPEC_JSON"
# What `pulumi destroy` ends with (its versions quote the command with ` or '): advice to run
# `pulumi stack rm`, which `down` does itself right after, so nothing of the stack is left to remove.
STACK_RM_ADVICE = ("history and configuration associated with the stack are still maintained",
                   "If you want to remove the stack completely, run")


def pulumi_stack(spec_or_name: ClusterSpec | str, env: dict[str, str], *, create: bool = True) -> Any:
    from pulumi import automation as auto

    name = spec_or_name if isinstance(spec_or_name, str) else spec_or_name.name
    select = auto.create_or_select_stack if create else auto.select_stack
    return select(stack_name=name, work_dir=str(project_root()), opts=auto.LocalWorkspaceOptions(env_vars=env))


def program_env(spec: ClusterSpec, expires_at: int | None, public_key: str | None = None) -> dict[str, str]:
    """What the Pulumi program reads besides its stack file: the validated spec, the nodes'
    SSH key and the expiry written into labels at creation."""
    if public_key is None:
        public_key = keys.read_public_key(state_dir(spec.name) / "keys" / "id_ed25519")
    return {SPEC_ENV: spec.model_dump_json(), "TRAINCTL_SSH_PUBLIC_KEY": public_key,
            "TRAINCTL_EXPIRES_AT": str(expires_at)}


def destroy_env(meta: dict[str, Any] | None) -> dict[str, str]:
    """What `pulumi destroy` runs the program with: the recorded spec (no key: nothing is
    created); an adopted stack's program reads its own stack file, as at `pulumi destroy` by hand."""
    if not meta or meta.get("adopted"):
        return {}
    return {SPEC_ENV: json.dumps(meta["spec"]), "TRAINCTL_SSH_PUBLIC_KEY": "unused",
            "TRAINCTL_EXPIRES_AT": str(meta["expires_at"])}


def _meta_path(stack: str) -> Path:
    return state_dir(stack) / "gcp.json"


def read_meta(stack: str) -> dict[str, Any] | None:
    path = _meta_path(stack)
    return json.loads(path.read_text()) if path.exists() else None


def write_meta(spec: ClusterSpec, expires_at: int | None, adopted: bool = False) -> dict[str, Any]:
    meta = {"created_at": time.time(), "expires_at": expires_at, "adopted": adopted,
            "spec": spec.model_dump(mode="json")}
    _meta_path(spec.name).write_text(json.dumps(meta, indent=2))
    return meta


def record_landed_spec(spec: ClusterSpec) -> None:
    """The spec `up` placed, kept as the stack's (its zone, after a failover): what `repair` and
    `down` hand the program again. Creation time and expiry stay as recorded."""
    meta = read_meta(spec.name) or {}
    _meta_path(spec.name).write_text(json.dumps({**meta, "spec": spec.model_dump(mode="json")}, indent=2))


def current_meta(spec: ClusterSpec) -> dict[str, Any]:
    """The stack's record, with an expiry still ahead: an `up` after the expiry has passed
    starts a new TTL (the old label would have the next reap delete what this `up` makes)."""
    meta = read_meta(spec.name)
    now = time.time()
    if meta is None or (meta.get("expires_at") is not None and meta["expires_at"] <= now):
        meta = write_meta(spec, int(now + spec.ttl_hours * 3600))
    return meta


def destroy_output(progress: Callable[[str], None]) -> Callable[[str], None]:
    """`pulumi destroy`'s lines for `progress`, less its advice to remove the stack (STACK_RM_ADVICE)."""
    def relay(line: str) -> None:
        if not any(advice in line for advice in STACK_RM_ADVICE):
            progress(line)
    return relay
