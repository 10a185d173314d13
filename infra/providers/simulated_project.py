"""`--simulate`: a GCP stack stood up in a simulated project on this machine (gcpsim/, a project
of its own), as a convenience: it starts the simulator, creates the project and points this
process at the simulator's endpoints, as a user with a private endpoint would. The GCP realizer
knows nothing of it: it records the endpoints in the stack's state at `up` and every later verb
reaches them from there (infra/providers/gcp/private_endpoints.py).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from infra.errors import ConfigError, ProvisionError
from infra.providers.gcp import private_endpoints
from infra.providers.realizers import unsupported
from infra.providers.stack_home import trainctl_home
from infra.spec.cluster import ClusterSpec


def home() -> Path:
    return trainctl_home() / "simulator"


def start(spec: ClusterSpec, project_file: Path | None) -> None:
    """Point this process at a simulated project for the stack's gcp:project."""
    if spec.provider != "gcp":
        raise unsupported(spec.provider, "--simulate", "the local stack already runs on this machine; "
                                                       "--simulate stands a gcp stack up in a simulated project")
    start_project(spec.project, project_file)


def start_project(project: str | None, project_file: Path | None = None, *, api_only: bool = False) -> str:
    """Start (or find) the simulator, create the project if it does not exist yet (from the
    file, else the prepared template), and use its endpoints; returns its API's URL.
    `api_only`: VMs are the API's alone, no machines stand behind them (no root needed)."""
    from gcpsim import endpoints as simulator
    from gcpsim.daemon import SimulatorUnavailable
    from gcpsim.errors import SimulatorError
    from gcpsim.project import ProjectFile, load_project_file

    if project is None:
        raise ConfigError("--simulate needs the stack's gcp:project (the simulated project's id)")
    try:
        described = load_project_file(project_file) if project_file else None
    except SimulatorError as exc:
        raise ConfigError(str(exc)) from None
    if described is not None and described.project != project:
        raise ConfigError(f"the simulated project file {project_file} describes project "
                          f"{described.project!r}, but the stack names gcp:project {project!r}")
    try:
        reach = private_endpoints.PrivateEndpoints.model_validate(simulator.ensure(home(), api_only=api_only))
    except SimulatorUnavailable as exc:
        raise ProvisionError(str(exc)) from None
    _post(reach.api, "/trainctl-sim/v1/projects", (described or ProjectFile(project=project)).model_dump(mode="json"))
    private_endpoints.use(reach)
    return reach.api


def stand_in_image(name: str, code_dir: Path, env: Path | None, rsync_filters: tuple[str, ...]) -> str:
    """A simulated GKE cluster's pods run the code (copied with these rsync filters) and the
    environment made for it, in place of an image built from it (its machines pull nothing):
    the image's reference."""
    from gcpsim.kubernetes.images import stand_in_code

    return stand_in_code(home(), name, code_dir, env, rsync_filters)


def _post(url: str, path: str, body: Any) -> Any:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())
