"""How long a GCP VM stack with idle_minutes has sat idle, as the watch on its node 0 last saw
(node_idle_watch.py publishes it as the guest attribute trainctl/idle-since; `trainctl ls`
reads it through Compute's getGuestAttributes)."""

from __future__ import annotations

import time

from infra.providers.gcp import private_endpoints
from infra.providers.gcp.reaper import google_client
from infra.spec.cluster import ClusterSpec

NAMESPACE, KEY = "trainctl", "idle-since"


def idle_hours(spec: ClusterSpec) -> float | None:
    """None: no watch (or node 0 unreachable, e.g. already reaped); 0.0: in use or not yet seen."""
    if spec.idle_minutes is None or spec.kind != "vm" or spec.ephemeral:
        return None
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError
    from google.cloud import compute_v1

    try:
        private_endpoints.resume(spec.name)
        attrs = google_client(compute_v1.InstancesClient).get_guest_attributes(
            request=compute_v1.GetGuestAttributesInstanceRequest(
                project=spec.project, zone=spec.zone, instance=f"{spec.name}-node-0", query_path=f"{NAMESPACE}/"))
    except (GoogleAPIError, GoogleAuthError):  # `ls` lists the stack all the same
        return None
    since = next((i.value for i in attrs.query_value.items if (i.namespace, i.key) == (NAMESPACE, KEY)), "")
    return (time.time() - float(since)) / 3600 if since else 0.0
