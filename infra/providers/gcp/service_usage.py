"""Service Usage over REST: enabling an API before trainctl reads through it.

Hand-written over `google-cloud-service-usage` on purpose: one call and its operation, where the
client library would be a further dependency of the controller; the request is the REST
reference's (https://cloud.google.com/service-usage/docs/reference/rest/v1/services/batchEnable).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from infra.errors import ProvisionError
from infra.providers.gcp.reaper import API_ENDPOINT_ENV

DEFAULT_ENDPOINT = "https://serviceusage.googleapis.com"


def session() -> Any:
    import google.auth
    from google.auth.credentials import AnonymousCredentials
    from google.auth.transport.requests import AuthorizedSession

    if os.environ.get(API_ENDPOINT_ENV):
        return AuthorizedSession(AnonymousCredentials())
    credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    return AuthorizedSession(credentials)


def base_url(default: str = DEFAULT_ENDPOINT) -> str:
    """The private endpoint serving every Google API where one is set (API_ENDPOINT_ENV), else `default`."""
    return os.environ.get(API_ENDPOINT_ENV) or default


def enable(project: str, services: list[str], *, timeout: float,
           sleep: Callable[[float], None] = time.sleep) -> None:
    """Enables the services and waits for the operation; raises ProvisionError with Google's
    own message if it fails or does not finish within `timeout` seconds."""
    http = session()
    response = http.post(f"{base_url()}/v1/projects/{project}/services:batchEnable",
                         json={"serviceIds": services})
    op = _json_or_raise(response, f"enabling {', '.join(services)}")
    deadline = time.monotonic() + timeout
    delay = 0.2
    while not op.get("done"):
        if time.monotonic() > deadline:
            raise ProvisionError(f"enabling {', '.join(services)} in {project} did not finish in {timeout:.0f} s "
                                 f"(operation {op.get('name')})")
        sleep(delay)
        delay = min(delay * 2, 5.0)
        op = _json_or_raise(http.get(f"{base_url()}/v1/{op['name']}"), "waiting for the enablement")
    if op.get("error"):
        raise ProvisionError(f"enabling {', '.join(services)} in {project} failed: {op['error'].get('message')}")


def _json_or_raise(response: Any, doing: str) -> dict[str, Any]:
    if response.status_code >= 400:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError):
            message = response.text[:300]
        raise ProvisionError(f"{doing}: {response.status_code} {message}")
    return response.json()
