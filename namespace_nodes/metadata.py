"""A GCE metadata server for the local stack's nodes, with GCE's rules.

One server per stack runs in the bucket's namespace on 169.254.169.254:80; every node routes
that address there and resolves metadata.google.internal to it (its hosts file), as a VM does.
The server tells nodes apart by their source address: a node sees, and may write, only its own
instance's values. It answers as GCE's does:
  - `Metadata-Flavor: Google` is required (403 without it; 403 too with X-Forwarded-For, which
    only a proxy would add), and every answer carries it;
  - a directory lists its entries one per line (subdirectories end in '/'); `?recursive=true`
    returns the subtree as JSON with GCE's camelCase keys; a directory asked for without its
    trailing slash is redirected;
  - `?wait_for_change=true` holds the request until the value differs from `last_etag` (or
    from what it was when asked), up to `timeout_sec`; every answer has an ETag;
  - guest attributes (`instance/guest-attributes/<namespace>/<key>`) are written by the node
    with PUT, as GCE's guest agent writes `hostkeys/`.

The controller has a second listener on the bucket's bridge address (its iptables admit only the
controller): it reads guest attributes in the shape of Compute's `getGuestAttributes`,
preempts or resets a node, and announces host maintenance (`instance/maintenance-event`).
State lives in this process; the realizer restarts it with the stack.
Run: python -m namespace_nodes.metadata --config FILE --listen IP:PORT --admin IP:PORT
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the server's; the realizer imports this module for its constants only
    from aiohttp import web

METADATA_IP = "169.254.169.254"
METADATA_HOST = "metadata.google.internal"
ADMIN_PORT = 8089
ROOT = "/computeMetadata/v1"
DEFAULT_WAIT_SECONDS = 60 * 60  # GCE holds a wait_for_change up to its own limit; so do we
FLAVOR = {"Metadata-Flavor": "Google"}
# `instance/maintenance-event`'s values (cloud.google.com/compute/docs/metadata/getting-live-migration-notice)
MAINTENANCE_EVENTS = ("NONE", "MIGRATE_ON_HOST_MAINTENANCE", "TERMINATE_ON_HOST_MAINTENANCE")


def instance_tree(node: dict[str, Any], project: dict[str, Any]) -> dict[str, Any]:
    """A node's `instance/` directory, keyed as the metadata server's paths are. The optional
    `external-ip`, `network` and `tags` of a record appear where GCE serves them."""
    number = project["numeric-project-id"]
    interface: dict[str, Any] = {"ip": node["ip"]}
    if node.get("external-ip"):
        interface["access-configs"] = [{"external-ip": node["external-ip"], "type": "ONE_TO_ONE_NAT"}]
    if node.get("network"):
        interface["network"] = f"projects/{number}/networks/{node['network']}"
    tree = {
        "attributes": dict(node.get("attributes", {})),
        "guest-attributes": {},
        "hostname": f"{node['name']}.{node['zone']}.c.{project['project-id']}.internal",
        "id": node["id"],
        "machine-type": f"projects/{number}/machineTypes/{node['machine-type']}",
        "maintenance-event": "NONE",
        "name": node["name"],
        "network-interfaces": [interface],
        "preempted": "FALSE",
        "scheduling": {"automatic-restart": "FALSE" if node.get("spot") else "TRUE",
                       "on-host-maintenance": "TERMINATE",
                       "preemptible": "TRUE" if node.get("spot") else "FALSE"},
        "zone": f"projects/{number}/zones/{node['zone']}",
    }
    if "tags" in node:  # GCE serves instance/tags as a JSON list
        tree["tags"] = json.dumps(list(node["tags"]))
    if node.get("service-account"):  # under default/ and under its email, as GCE lists it
        account = node["service-account"]
        entry = {"email": account["email"], "scopes": "".join(f"{s}\n" for s in account["scopes"]), "token": Token(account["token"])}
        tree["service-accounts"] = {"default": entry, account["email"]: entry}
    return tree


class Token(str):
    """An access token: served as JSON, as GCE does (google-auth parses only that), never listed."""
    def answer(self) -> str:
        return json.dumps({"access_token": str(self), "expires_in": 3599, "token_type": "Bearer"})


def camel(key: str) -> str:
    head, *rest = key.split("-")
    return head + "".join(part.capitalize() for part in rest)


def as_json(value: Any, keys_as_is: bool = False) -> Any:
    """GCE's recursive JSON: camelCase keys, except inside user-named maps (attributes)."""
    if isinstance(value, dict):
        return {(k if keys_as_is else camel(k)): as_json(v, k in ("attributes", "guest-attributes"))
                for k, v in value.items() if not isinstance(v, Token)}
    if isinstance(value, list):
        return [as_json(v) for v in value]
    return value


class Instances:
    """Every node's tree, by its address; a condition wakes the held wait_for_change requests."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.project = dict(config["project"])
        self.by_ip: dict[str, dict[str, Any]] = {}
        self.names: dict[str, str] = {}  # node name -> ip
        for node in config["nodes"]:
            self.put(node)
        import asyncio  # the server's alone: the realizer imports this module for its constants

        self.changed = asyncio.Condition()

    def put(self, node: dict[str, Any]) -> None:
        """A node as booted (or recreated): fresh values, no guest attributes, not preempted.
        Nodes are known by their `handle` where names are not unique (one server for several
        zones), else by name."""
        handle = node.get("handle", node["name"])
        self.remove(handle)
        self.by_ip[node["ip"]] = instance_tree(node, self.project)
        self.names[handle] = node["ip"]

    def remove(self, handle: str) -> None:
        old = self.names.pop(handle, None)
        if old is not None:
            self.by_ip.pop(old, None)

    def tree(self, ip: str) -> dict[str, Any] | None:
        instance = self.by_ip.get(ip)
        if instance is None:
            return None
        return {"instance": instance, "project": self.project}

    async def notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()


def lookup(tree: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(tree, dict) and part in tree:
            tree = tree[part]
        elif isinstance(tree, list) and part.isdigit() and int(part) < len(tree):
            tree = tree[int(part)]
        else:
            raise KeyError(part)
    return tree


def render(value: Any, directory: bool, query: Any) -> tuple[str, str]:
    """(body, content type) of a value as GCE answers it."""
    if isinstance(value, Token):
        return value.answer(), "application/json"
    if directory and query.get("recursive") == "true":
        return json.dumps(as_json(value), sort_keys=True), "application/json"
    if query.get("alt") == "json":
        return json.dumps(as_json(value) if directory else value), "application/json"
    if directory:
        entries = value.items() if isinstance(value, dict) else enumerate(value)
        return "".join(f"{k}/\n" if isinstance(v, (dict, list)) else f"{k}\n"
                       for k, v in entries), "application/text"
    return str(value), "application/text"


def etag(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def refused(request: web.Request) -> web.Response | None:
    from aiohttp import web

    if request.headers.get("Metadata-Flavor") != "Google":
        return web.Response(status=403, text="Missing required header: Metadata-Flavor: Google\n",
                            headers=FLAVOR)
    if "X-Forwarded-For" in request.headers:
        return web.Response(status=403, text="Request had an X-Forwarded-For header\n", headers=FLAVOR)
    return None


@dataclass
class NodeEndpoints:
    """What a node asks at 169.254.169.254: its own instance's values, told apart by its address."""

    instances: Instances

    def answer(self, ip: str, parts: list[str], query: Any) -> tuple[str, str, bool] | None:
        """(body, content type, is a directory); None: no such path for this node."""
        tree = self.instances.tree(ip)
        if tree is None:
            return None
        try:
            value = lookup(tree, parts)
        except KeyError:
            return None
        directory = isinstance(value, (dict, list))
        return (*render(value, directory, query), directory)

    async def get(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        if (no := refused(request)) is not None:
            return no
        path = request.match_info["path"]
        parts = [p for p in path.split("/") if p]
        found = self.answer(request.remote or "", parts, request.query)
        if found is None:
            return web.Response(status=404, text="Not Found\n", headers=FLAVOR)
        if found[2] and path and not path.endswith("/"):
            raise web.HTTPMovedPermanently(f"{ROOT}/{path}/", headers=FLAVOR)
        if request.query.get("wait_for_change") == "true":
            found = await self.changed(request, parts, found)
            if found is None:
                return web.Response(status=404, text="Not Found\n", headers=FLAVOR)
        body, kind, _ = found
        return web.Response(text=body, content_type=kind, headers={**FLAVOR, "ETag": etag(body)})

    async def changed(self, request: web.Request, parts: list[str],
                      found: tuple[str, str, bool]) -> tuple[str, str, bool] | None:
        """`wait_for_change`: the answer once it differs from `last_etag` (or from `found`), or
        `found` unchanged when `timeout_sec` passes first, as GCE answers."""
        import asyncio

        seen = request.query.get("last_etag") or etag(found[0])
        timeout = float(request.query.get("timeout_sec", DEFAULT_WAIT_SECONDS))
        try:
            async with asyncio.timeout(timeout):
                while etag(found[0]) == seen:
                    async with self.instances.changed:
                        await self.instances.changed.wait()
                    now = self.answer(request.remote or "", parts, request.query)
                    if now is None:
                        return None
                    found = now
        except TimeoutError:
            pass  # GCE answers with the unchanged value when the wait times out
        return found

    async def put(self, request: web.Request) -> web.Response:
        """Guest attributes only, as GCE's guest agent writes `hostkeys/`."""
        from aiohttp import web

        if (no := refused(request)) is not None:
            return no
        parts = [p for p in request.match_info["path"].split("/") if p]
        tree = self.instances.tree(request.remote or "")
        if tree is None or len(parts) != 4 or parts[:2] != ["instance", "guest-attributes"]:
            return web.Response(status=403, text="Only guest attributes can be written\n", headers=FLAVOR)
        namespace, key = parts[2], parts[3]
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,63}", namespace) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", key):
            return web.Response(status=400, text="Bad guest attribute name\n", headers=FLAVOR)
        value = await request.text()
        tree["instance"]["guest-attributes"].setdefault(namespace, {})[key] = value
        await self.instances.notify()
        return web.Response(text="", headers=FLAVOR)


def node_app(instances: Instances) -> web.Application:
    from aiohttp import web

    endpoints = NodeEndpoints(instances)
    app = web.Application()
    app.router.add_get(ROOT + "/{path:.*}", endpoints.get)
    app.router.add_put(ROOT + "/{path:.*}", endpoints.put)
    return app


@dataclass
class AdminEndpoints:
    """The controller's listener: Compute's view of the instances (guest attributes, metadata)
    and what Compute does to them (preempt, boot again, delete)."""

    instances: Instances

    def instance_of(self, request: web.Request) -> dict[str, Any]:
        from aiohttp import web

        ip = self.instances.names.get(request.match_info["node"])
        if ip is None:
            raise web.HTTPNotFound(text=f"no node {request.match_info['node']}\n")
        return self.instances.by_ip[ip]

    async def guest_attributes(self, request: web.Request) -> web.Response:
        """In the shape of Compute's instances.getGuestAttributes."""
        from aiohttp import web

        query_path = request.query.get("queryPath", "")
        namespace = query_path.strip("/").split("/")[0]
        items = [{"namespace": ns, "key": key, "value": value}
                 for ns, values in self.instance_of(request)["guest-attributes"].items()
                 if not namespace or ns == namespace for key, value in values.items()]
        return web.json_response({"kind": "compute#guestAttributes", "queryPath": query_path,
                                  "queryValue": {"items": items}})

    async def preempt(self, request: web.Request) -> web.Response:
        from aiohttp import web

        self.instance_of(request)["preempted"] = "TRUE"
        await self.instances.notify()
        return web.json_response({"preempted": "TRUE"})

    async def maintenance(self, request: web.Request) -> web.Response:
        from aiohttp import web

        event = (await request.json()).get("event")
        if event not in MAINTENANCE_EVENTS:
            raise web.HTTPBadRequest(text=f"event {event!r}: one of {', '.join(MAINTENANCE_EVENTS)}\n")
        self.instance_of(request)["maintenance-event"] = event
        await self.instances.notify()
        return web.json_response({"maintenance-event": event})

    async def boot(self, request: web.Request) -> web.Response:
        """A node created again under its name (repair): values of a fresh instance."""
        from aiohttp import web

        node = await request.json()
        handle = request.match_info["node"]
        self.instances.put({"name": handle, **node, "handle": handle})
        await self.instances.notify()
        return web.json_response({"booted": node["name"]} if "name" in node else {"booted": True})

    async def instance(self, request: web.Request) -> web.Response:
        from aiohttp import web

        return web.json_response(copy.deepcopy(self.instance_of(request)))

    async def remove(self, request: web.Request) -> web.Response:
        """The instance is deleted: its address answers nothing any more."""
        from aiohttp import web

        self.instances.remove(request.match_info["node"])
        await self.instances.notify()
        return web.json_response({"removed": request.match_info["node"]})

    async def set_attributes(self, request: web.Request) -> web.Response:
        """instances.setMetadata: new custom values; guest attributes and state stay."""
        from aiohttp import web

        self.instance_of(request)["attributes"] = dict(await request.json())
        await self.instances.notify()
        return web.json_response({"attributes": "set"})

    async def set_project_attributes(self, request: web.Request) -> web.Response:
        """projects.setCommonInstanceMetadata: every node sees the new project values."""
        from aiohttp import web

        self.instances.project["attributes"] = dict(await request.json())
        await self.instances.notify()
        return web.json_response({"attributes": "set"})


def admin_app(instances: Instances) -> web.Application:
    from aiohttp import web

    endpoints = AdminEndpoints(instances)
    app = web.Application()
    app.router.add_get("/nodes/{node}", endpoints.instance)
    app.router.add_get("/nodes/{node}/guest-attributes", endpoints.guest_attributes)
    app.router.add_post("/nodes/{node}/preempt", endpoints.preempt)
    app.router.add_put("/nodes/{node}/maintenance-event", endpoints.maintenance)
    app.router.add_put("/nodes/{node}", endpoints.boot)
    app.router.add_delete("/nodes/{node}", endpoints.remove)
    app.router.add_put("/nodes/{node}/attributes", endpoints.set_attributes)
    app.router.add_put("/project/attributes", endpoints.set_project_attributes)
    return app


async def serve(config: dict[str, Any], listen: tuple[str, int], admin: tuple[str, int]) -> None:
    from aiohttp import web

    instances = Instances(config)
    runners = []
    for app, (host, port) in ((node_app(instances), listen), (admin_app(instances), admin)):
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        runners.append(runner)
    import asyncio

    await asyncio.Event().wait()


def address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host, int(port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--listen", type=address, default=(METADATA_IP, 80))
    parser.add_argument("--admin", type=address, required=True)
    args = parser.parse_args()
    import asyncio

    asyncio.run(serve(json.loads(args.config.read_text()), args.listen, args.admin))


if __name__ == "__main__":
    main()
