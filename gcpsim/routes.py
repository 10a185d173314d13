"""What the API modules register with the simulator's front end (server.py): the handler of
each discovery method id (`@handles("compute.instances.insert")`), handlers of requests outside
the discovery documents, the simulator's own admin paths, and the services they run beside it.
A module of its own so that the API modules and the server each import it, never each other."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from gcpsim import discovery
from gcpsim.machines import MachineBackend
from gcpsim.state import World

if TYPE_CHECKING:
    from gcpsim.server import Simulator


@dataclass
class Raw:
    """A response that is not JSON (object media), or JSON with a status other than 200."""
    body: bytes
    content_type: str = "application/octet-stream"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Call:
    sim: Simulator
    world: World
    method: discovery.Method
    params: dict[str, str]
    query: dict[str, list[str]]
    body: Any
    raw: bytes
    headers: dict[str, str]
    now: float

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    @property
    def project_id(self) -> str:
        """The request's project as the world knows it (by id even if named by number)."""
        p = self.world.project(project_in(self.params, self.query) or "")
        assert p is not None
        return p["id"]

    @property
    def backend(self) -> MachineBackend:
        return self.sim.backend

    @property
    def base_url(self) -> str:
        return self.sim.url


Handler = Callable[[Call], Any]
HANDLERS: dict[str, Handler] = {}
# Requests Google serves outside its discovery documents (Storage media downloads, resumable
# upload sessions, batches): each function answers (status, headers, body) or returns None.
RawHandler = Callable[["Simulator", str, str, bytes, dict[str, str]],
                      "tuple[int, dict[str, str], bytes] | None"]
RAW: list[RawHandler] = []
# For paths several APIs share (`.../locations/l/operations/o`): whether the call is this API's.
CLAIMS: dict[str, Callable[[World, dict[str, str]], bool]] = {}
# Projects that exist outside any simulated world (Google's public image projects), by the
# method-id prefixes callers may use on them: {"debian-cloud": ("compute.images.",)}.
PUBLIC_PROJECTS: dict[str, tuple[str, ...]] = {}
AdminHandler = Callable[["Simulator", re.Match[str], Any], Any]
ADMIN: list[tuple[str, re.Pattern[str], AdminHandler]] = []
ADMIN_PREFIX = "/trainctl-sim/v1/"
# What API modules started beside the simulator and must stop with it (given the home).
STOPS: list[Callable[[Path], None]] = []
# What API modules serve beside the simulator while their resources exist (a GKE cluster's
# Kubernetes API and its pods): resumed when the simulator starts (a daemon restarted while
# clusters exist), and keeping it up while any is alive.
STARTS: list[Callable[["Simulator"], None]] = []
ALIVE: list[Callable[[Path], bool]] = []


# Checks every call passes before its handler answers (who may call what): each raises an ApiError.
GUARDS: list[Handler] = []


def guard(fn: Handler) -> Handler:
    GUARDS.append(fn)
    return fn


def handles(method_id: str, claims: Callable[[World, dict[str, str]], bool] | None = None
            ) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[method_id] = fn
        if claims is not None:
            CLAIMS[method_id] = claims
        return fn
    return register


def raw(fn: RawHandler) -> RawHandler:
    RAW.append(fn)
    return fn


def admin(verb: str, pattern: str) -> Callable[[AdminHandler], AdminHandler]:
    def register(fn: AdminHandler) -> AdminHandler:
        ADMIN.append((verb, re.compile("^" + ADMIN_PREFIX + pattern + "$"), fn))
        return fn
    return register


def project_in(params: dict[str, str], query: dict[str, list[str]]) -> str | None:
    for key in ("project", "projectId"):  # Compute; CRM v1 and GKE's zonal paths
        if key in params:
            return params[key]
    # Cloud Resource Manager v1 get/setIamPolicy: `resource` is the bare project id
    if "/" not in params.get("resource", "/"):
        return params["resource"]
    for value in params.values():
        m = re.match(r"^projects/([^/]+)", value)
        if m:
            return m[1]
    if "project" in query:  # storage buckets.insert / buckets.list
        return query["project"][0]
    return None
