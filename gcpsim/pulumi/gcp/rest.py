"""Google's REST APIs as the Terraform provider calls them: plain JSON over HTTP (no
credentials: the only endpoints this stand-in can reach are the simulator's, which checks
none), errors rendered as google-api-go-client's googleapi.Error renders them (the text the
provider wraps and the CLI prints), transient answers retried, and long-running operations
polled until done as the provider's waiters poll them (compute operations through their zone,
region or global collection; google.longrunning operations by name; GKE's by location).

The provider polls every 10 s (transport_tpg.Config.PollInterval); the simulator finishes its
operations in fractions of a second, so this polls from 50 ms up to 1 s instead.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Sequence
from urllib.parse import urlencode

from gcpsim.pulumi.plugins import ProviderError

RETRIED = (429, 500, 502, 503)  # transport_tpg's common retryable codes
DEFAULT_TIMEOUT_SECONDS = 20 * 60  # the provider's default create/update/delete timeout


class GoogleApiError(ProviderError):
    """An error answer: str() is googleapi.Error.Error() of google-api-go-client."""

    def __init__(self, code: int, body: bytes) -> None:
        self.code = code
        self.body = body.decode(errors="replace")
        try:
            error = json.loads(self.body).get("error") or {}
        except (ValueError, AttributeError):
            error = {}
        self.message = str(error.get("message") or "")
        self.errors = [e for e in error.get("errors") or [] if isinstance(e, dict)]
        self.details = error.get("details") or []
        self.reasons = {e.get("reason") for e in self.errors} | {
            d.get("reason") for d in self.details if isinstance(d, dict)}
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.errors and not self.message:
            return f"googleapi: got HTTP response code {self.code} with body: {self.body}"
        text = f"googleapi: Error {self.code}: {self.message}"
        if self.details:
            text += "\nDetails:\n" + json.dumps(self.details, indent=2, sort_keys=True) + "\n"
        if not self.errors:
            return text.strip()
        if len(self.errors) == 1 and self.errors[0].get("message") == self.message:
            return f"{text}, {self.errors[0].get('reason')}"
        return text + "\nMore details:\n" + "".join(
            f"Reason: {e.get('reason')}, Message: {e.get('message')}\n" for e in self.errors)


def is_not_found(exc: Exception) -> bool:
    return isinstance(exc, GoogleApiError) and exc.code == 404


class Rest:
    def __init__(self, user_agent: str = "Pulumi/3.0.0 (trainctl simulator) terraform-provider-google-beta") -> None:
        self.user_agent = user_agent

    def call(self, method: str, url: str, body: Any = None, query: dict[str, str] | None = None,
             *, data: bytes | None = None, content_type: str = "application/json") -> Any:
        if query:
            url += ("&" if "?" in url else "?") + urlencode(query)
        payload = data if data is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"User-Agent": self.user_agent}
        if payload is not None:
            headers["Content-Type"] = content_type
        delay = 0.2
        for attempt in range(6):
            request = urllib.request.Request(url, data=payload, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    raw = response.read()
                    return json.loads(raw) if raw.strip() else {}
            except urllib.error.HTTPError as exc:
                error = GoogleApiError(exc.code, exc.read())
                if exc.code not in RETRIED or attempt == 5:
                    raise error from None
            except urllib.error.URLError as exc:
                raise ProviderError(f"{method} {url}: {exc.reason}") from None
            time.sleep(delay)
            delay = min(delay * 2, 3.0)
        raise AssertionError("unreachable")

    def get(self, url: str, query: dict[str, str] | None = None) -> Any:
        return self.call("GET", url, query=query)


def poll(fetch: Callable[[], dict[str, Any]], done: Callable[[dict[str, Any]], bool], activity: str,
         timeout: float = DEFAULT_TIMEOUT_SECONDS) -> dict[str, Any]:
    """Fetch until done (tpgresource.OperationWait); a timeout reads as the provider's."""
    deadline = time.monotonic() + timeout
    wait = 0.05
    while True:
        op = fetch()
        if done(op):
            return op
        if time.monotonic() > deadline:
            raise ProviderError(f"Error waiting for {activity}: timeout while waiting for state to "
                                f"become 'DONE' (last state: '{op.get('status', 'done: false')}', "
                                f"timeout: {timeout:.0f}s)")
        time.sleep(wait)
        wait = min(wait * 1.5, 1.0)


def wait_for_state(fetch: Callable[[], dict[str, Any]], state_of: Callable[[dict[str, Any]], str],
                   pending: Sequence[str], target: str, timeout: float) -> dict[str, Any]:
    """retry.StateChangeConf.WaitForState (terraform-plugin-sdk helper/retry/state.go): refresh
    until the target state; a state neither pending nor the target fails at once
    (UnexpectedStateError), the timeout with the last state seen (TimeoutError)."""
    deadline = time.monotonic() + timeout
    wait = 0.05
    while True:
        found = fetch()
        state = state_of(found)
        if state == target:
            return found
        if state not in pending:  # helper/retry/error.go UnexpectedStateError.Error(), no last error
            raise ProviderError(f"unexpected state '{state}', wanted target '{target}'")
        if time.monotonic() > deadline:  # helper/retry/error.go TimeoutError.Error()
            raise ProviderError(f"timeout while waiting for state to become '{target}' "
                                f"(last state: '{state}', timeout: {timeout:.0f}s)")
        time.sleep(wait)
        wait = min(wait * 1.5, 1.0)


def compute_operation_error(error: dict[str, Any]) -> str:
    """ComputeOperationError.Error() (services/compute/compute_operation.go): each error's
    message, a quota's metric/limit, the first localized message and help link."""
    out = []
    for item in error.get("errors") or []:
        out.append(f"{item.get('message', '')}\n")
        code = item.get("code")
        localized = link_description = link_url = ""
        for detail in item.get("errorDetails") or []:
            quota = detail.get("quotaInfo")
            if code == "QUOTA_EXCEEDED" and quota:
                out.append(_quota_lines(quota))
                break
            localized = localized or (detail.get("localizedMessage") or {}).get("message", "")
            links = (detail.get("help") or {}).get("links") or []
            if not link_url and links:
                link_description, link_url = links[0].get("description", ""), links[0].get("url", "")
            if localized and link_url:
                break
        if localized:
            out.append(f"\n\n{localized}\n")
        if link_url:
            out.append("\n\n" + (f"{link_description}\n" if link_description else "") + f"{link_url}\n")
    return "".join(out)


def _quota_lines(quota: dict[str, Any]) -> str:
    lines = []
    for key, label in (("metricName", "metric name"), ("limitName", "limit name")):
        if quota.get(key):
            lines.append(f"\t{label} = {quota[key]}\n")
    if quota.get("limit"):
        lines.append(f"\tlimit = {_number(quota['limit'])}\n")
    if quota.get("futureLimit"):
        lines.append(f"\tfuture limit = {_number(quota['futureLimit'])}\n\trollout status = in progress\n")
    if quota.get("dimensions"):
        dims = " ".join(f"{k}:{v}" for k, v in sorted(quota["dimensions"].items()))
        lines.append(f"\tdimensions = map[{dims}]\n")
    return "".join(lines)


def _number(value: Any) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() else str(number)
