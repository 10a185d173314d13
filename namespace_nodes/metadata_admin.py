"""The controller's side of the local metadata server (namespace_nodes/metadata.py): read a node's
guest attributes in the shape of Compute's getGuestAttributes, preempt a node, announce host
maintenance on one, boot one again;
for the GCP simulator also change metadata (instance and project) and remove a deleted node."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

TIMEOUT = 10.0


def _call(url: str, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        return json.load(response)


def guest_attributes(admin: str, node: str, query_path: str) -> dict[str, Any]:
    """{"queryPath": ..., "queryValue": {"items": [{"namespace", "key", "value"}]}}"""
    return _call(f"{admin}/nodes/{node}/guest-attributes?queryPath={query_path}")


def instance(admin: str, node: str) -> dict[str, Any]:
    return _call(f"{admin}/nodes/{node}")


def preempt(admin: str, node: str) -> None:
    _call(f"{admin}/nodes/{node}/preempt", "POST", {})


def announce_maintenance(admin: str, node: str, event: str) -> None:
    """`instance/maintenance-event` of the node becomes `event` (NONE: the maintenance is over)."""
    _call(f"{admin}/nodes/{node}/maintenance-event", "PUT", {"event": event})


def boot(admin: str, record: dict[str, Any], handle: str | None = None) -> None:
    """`handle`: what the node is known by where names repeat (zones); its name by default."""
    _call(f"{admin}/nodes/{handle or record['name']}", "PUT", record)


def remove(admin: str, node: str) -> None:
    _call(f"{admin}/nodes/{node}", "DELETE")


def set_attributes(admin: str, node: str, attributes: dict[str, str]) -> None:
    _call(f"{admin}/nodes/{node}/attributes", "PUT", attributes)


def set_project_attributes(admin: str, attributes: dict[str, str]) -> None:
    _call(f"{admin}/project/attributes", "PUT", attributes)
