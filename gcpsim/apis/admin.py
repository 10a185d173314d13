"""The simulator's own endpoints: what Google has no API for, under /trainctl-sim/v1/."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from gcpsim.apis import compute_reservations
from gcpsim.apis.compute_instance_spec import check_zone
from gcpsim.errors import ApiError
from gcpsim.project import ProjectFile
from gcpsim.routes import admin

if TYPE_CHECKING:
    from gcpsim.server import Simulator


@admin("POST", "projects")
def create_project(sim: Simulator, _m: re.Match[str], body: Any) -> Any:
    """Creates the project a project file describes; an existing one is left as it is (its
    state is the project's life so far), unless the body says `replace: true`."""
    body = dict(body or {})
    replace = bool(body.pop("replace", False))
    spec = ProjectFile.model_validate(body)
    with sim.store.transaction() as world:
        projects = world.data["projects"]
        if spec.project in projects and not replace:
            return {"project": spec.project, "created": False}
        projects[spec.project] = spec.initial_state()
        for reservation in spec.reservations:
            check_zone(reservation.zone)
            compute_reservations.store(world, spec.project, reservation.zone, reservation.body(), time.time())
        return {"project": spec.project, "created": True}


@admin("GET", "projects/(?P<project>[^/]+)")
def get_project(sim: Simulator, m: re.Match[str], _body: Any) -> Any:
    with sim.store.transaction() as world:
        project = world.project(m["project"])
        if project is None:
            raise ApiError(404, f"no simulated project {m['project']}")
        return {k: v for k, v in project.items() if k != "collections"}


@admin("PATCH", "projects/(?P<project>[^/]+)/quotas")
def set_quotas(sim: Simulator, m: re.Match[str], body: Any) -> Any:
    """Raises or lowers quota limits, as a granted quota request would: {region: {metric: n}}."""
    with sim.store.transaction() as world:
        project = world.project(m["project"])
        if project is None:
            raise ApiError(404, f"no simulated project {m['project']}")
        for region, limits in (body or {}).items():
            project["quotas"].setdefault(region, {}).update(limits)
        return project["quotas"]


@admin("GET", "health")
def health(sim: Simulator, _m: re.Match[str], _body: Any) -> Any:
    return {"ok": True, "machines": sim.has_machines()}


@admin("GET", "users/(?P<user>[a-z_][a-z0-9_-]*)")
def user_id(sim: Simulator, m: re.Match[str], _body: Any) -> Any:
    """The uid simulated machines gave a metadata user (the controller fills a package cache
    that user may link from)."""
    lookup = getattr(sim.backend, "user_id", None)
    uid = lookup(m["user"]) if lookup else None
    if uid is None:
        raise ApiError(404, f"no simulated machine has a user {m['user']!r}")
    return {"user": m["user"], "uid": uid}


@admin("POST", "stop-if-idle")
def stop_if_idle(sim: Simulator, _m: re.Match[str], _body: Any) -> Any:
    """Asked after a `down`: the service leaves if no machine or cluster is alive and no other
    request is being answered (another process may be mid-`up`); its world stays on disk."""
    idle = not sim.has_machines() and sim.busy.count <= 1
    if idle:
        sim.stop_requested.set()
    return {"stopping": idle}
