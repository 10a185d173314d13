"""A simulated GCP project with trainctl's GCP realizer pointed at it, as `--simulate` points it
(API-only: no machines stand behind the VMs, so no root is needed).

One simulator daemon for the session (`simulated_gcp`: found or started by
infra.providers.simulated_project.start_project exactly as `trainctl up --simulate` does it, stopped when the session
ends). Each test gets a project of its own in it (`gcp`, or `make_gcp(**project_file)` for another
project file), a copy of the Pulumi project whose stack files name that project as the working
directory, and its own Pulumi backend and stack state, so tests never see each other's stacks.
Every operation in the project takes no time unless the project file's `delays` say otherwise.

    from tests.fakes.sim_stacks import gcp, make_gcp, simulated_gcp  # noqa: F401   (the fixtures)

    def test_x(gcp):
        spec = gcp.stack("gpu-t4x2")             # stacks/Pulumi.gpu-t4x2.yaml, in gcp's project
        realizer.up(spec, progress)
        assert gcp.instance("gpu-t4x2-node-0")["status"] == "RUNNING"
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from gcpsim import daemon, nodes
from infra.providers import simulated_project
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import REPO_ROOT, load_stack

TESTS_HOMES = Path("/var/lib/trainctl-tests")  # TRAINCTL_HOME may not sit under /tmp



def _request(url: str, verb: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, method=verb, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else None


def nat_ip(vm: dict[str, Any]) -> str:
    """A VM's external address (its first access config), what trainctl reaches it at."""
    return str(vm["networkInterfaces"][0]["accessConfigs"][0]["natIP"])


@dataclass
class SimulatedGcp:
    """The session's simulator daemon and the TRAINCTL_HOME it serves."""
    trainctl_home: Path
    url: str

    @property
    def home(self) -> Path:
        """The simulator's own home (its world document), as `--simulate` places it."""
        return self.trainctl_home / "simulator"


@dataclass
class Project:
    """One test's simulated project, seen through the same REST APIs trainctl calls."""
    id: str
    sim: SimulatedGcp
    root: Path  # the Pulumi project (working directory) whose stack files name this project
    said: list[str] = field(default_factory=list)

    # --- calls ---------------------------------------------------------------------------
    def http(self, verb: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, parsed JSON) of a raw request; errors are answers, not exceptions."""
        return _request(self.sim.url + path, verb, body)

    def ok(self, verb: str, path: str, body: Any = None) -> Any:
        status, answer = self.http(verb, path, body)
        assert status == 200, (verb, path, status, answer)
        return answer

    def admin(self, verb: str, path: str, body: Any = None) -> Any:
        """The simulator's own endpoints for this project (stockouts, preemption, quotas)."""
        return self.ok(verb, f"/trainctl-sim/v1/projects/{self.id}/{path}", body)

    def compute(self, path: str) -> str:
        return f"/compute/v1/projects/{self.id}/{path}"

    def client(self, cls: Callable[..., Any]) -> Any:
        """A google-cloud-* client of the real library, pointed at the simulator as trainctl's are."""
        from infra.providers.gcp.reaper import google_client

        return google_client(cls)

    def next_command(self) -> None:
        """What the next trainctl command does first: the simulator that a `down` stopped
        (private_endpoints.release) is started again, on the same port, with the same world."""
        daemon.ensure_running(self.sim.home, api_only=True)

    def storage(self) -> Any:
        """google-cloud-storage's client, as trainctl makes it for a custom endpoint."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(project=self.id, credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.sim.url})

    def progress(self, line: str) -> None:
        """A realizer's progress callback that keeps what it was told (self.said)."""
        self.said.append(line)

    # --- what the project holds ----------------------------------------------------------
    def instances(self) -> dict[str, dict[str, Any]]:
        """Every VM of the project by name (compute aggregatedList)."""
        body = self.ok("GET", self.compute("aggregated/instances"))
        return {i["name"]: i for scope in (body.get("items") or {}).values() for i in scope.get("instances", [])}

    def instance(self, name: str, zone: str = "us-central1-a") -> dict[str, Any] | None:
        status, body = self.http("GET", self.compute(f"zones/{zone}/instances/{name}"))
        assert status in (200, 404), body
        return body if status == 200 else None

    def names(self, collection: str, region: str | None = None) -> set[str]:
        """Names in a global (networks, firewalls) or regional (subnetworks, routers) collection."""
        where = f"regions/{region}" if region else "global"
        return {item["name"] for item in self.ok("GET", self.compute(f"{where}/{collection}")).get("items", [])}

    def bucket(self, name: str) -> dict[str, Any] | None:
        status, body = self.http("GET", f"/storage/v1/b/{name}")
        assert status in (200, 404), body
        return body if status == 200 else None

    def tpu_node(self, zone: str, name: str) -> dict[str, Any] | None:
        status, body = self.http("GET", f"/v2/projects/{self.id}/locations/{zone}/nodes/{name}")
        assert status in (200, 404), body
        return body if status == 200 else None

    def operations(self) -> list[str]:
        """Every long-running operation the project's APIs have started (each create, delete,
        start, stop, update), from the simulator's world document: a list that stays the same
        means nothing was changed through them."""
        world = json.loads((self.sim.home / "world.json").read_text())
        return sorted(name for name, op in world["operations"].items() if op["project"] == self.id)

    # --- stacks ----------------------------------------------------------------------------
    def stack(self, stack: str, name: str | None = None, **overrides: Any) -> ClusterSpec:
        """A stack file of the project copy (which names this project), as trainctl loads it:
        optionally under another name, with overrides of its fields."""
        return load_stack(stack, name=name, overrides=overrides or None)

    def network(self, name: str, region: str, cidr: str = "10.128.0.0/20", subnet: str | None = None) -> None:
        """A custom-mode network with one subnetwork (`<name>-subnet` unless named)."""
        from google.cloud import compute_v1

        self.client(compute_v1.NetworksClient).insert(project=self.id, network_resource=compute_v1.Network(
            name=name, auto_create_subnetworks=False)).result()
        self.client(compute_v1.SubnetworksClient).insert(
            project=self.id, region=region, subnetwork_resource=compute_v1.Subnetwork(
                name=subnet or f"{name}-subnet", network=f"projects/{self.id}/global/networks/{name}",
                ip_cidr_range=cidr)).result()

    def host_key(self, instance: str, zone: str = "us-central1-a") -> str:
        """What the guest agent published for a VM, as an OpenSSH line."""
        answer = self.ok("GET", self.compute(f"zones/{zone}/instances/{instance}/getGuestAttributes")
                         + "?queryPath=hostkeys/")
        items = answer["queryValue"]["items"]
        return " ".join((items[0]["key"], items[0]["value"]))


@dataclass
class _Daemon:
    trainctl_home: Path
    url: str = ""


_SHARED: dict[str, _Daemon] = {}


def _shared_daemon(config: pytest.Config) -> _Daemon:
    """One TRAINCTL_HOME, hence one simulator daemon, for every module of the session that uses
    these fixtures (starting and stopping one costs ~0.6 s); stopped and removed when the session
    ends. A daemon that exited while idle between modules is started again by `activate`."""
    if "daemon" not in _SHARED:
        TESTS_HOMES.mkdir(parents=True, exist_ok=True, mode=0o700)
        shared = _Daemon(Path(tempfile.mkdtemp(prefix="gcp-sim-", dir=TESTS_HOMES)))

        def stop() -> None:
            daemon.stop(shared.trainctl_home / "simulator")
            # machines a test stood behind its VMs go with it, not with the folder's removal
            nodes.cleanup_all(shared.trainctl_home / "simulator")
            shutil.rmtree(shared.trainctl_home, ignore_errors=True)
            _SHARED.clear()

        config.add_cleanup(stop)
        _SHARED["daemon"] = shared
    return _SHARED["daemon"]


@pytest.fixture(scope="module")
def simulated_gcp(request: pytest.FixtureRequest) -> Iterator[SimulatedGcp]:
    """The simulator daemon, found or started as `--simulate` does it (simulated_project.start_project); the
    process environment it changes (endpoint, PATH, Pulumi backend) and the endpoints this process
    reaches Google through are restored after the module: a later module in the same worker
    reaches Google as before (a GCP stack there is not simulated)."""
    from infra.providers.gcp import private_endpoints

    saved, saved_endpoints = dict(os.environ), private_endpoints.in_use()
    shared = _shared_daemon(request.config)
    os.environ["TRAINCTL_HOME"] = str(shared.trainctl_home)
    try:
        shared.url = simulated_project.start_project(_project_id(), None, api_only=True)
        yield SimulatedGcp(shared.trainctl_home, shared.url)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        private_endpoints._in_use = saved_endpoints


def _project_id() -> str:
    return f"tc-{uuid.uuid4().hex[:12]}"


def _project_copy(root: Path, project: str) -> Path:
    """Pulumi.yaml and stacks/ (naming `project`), with the program beside them: the working
    directory a user's checkout is; a CLI that deletes a stack file deletes the copy's."""
    root.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    (root / "infra").symlink_to(REPO_ROOT / "infra")
    (root / "stacks").mkdir()
    for path in (REPO_ROOT / "stacks").glob("Pulumi.*.yaml"):
        text = re.sub(r"(?m)^(\s*gcp:project:\s*)\S+", rf"\g<1>{project}", path.read_text())
        (root / "stacks" / path.name).write_text(text)
    return root


def new_project(simulated_gcp: SimulatedGcp, folder: Path, monkeypatch: pytest.MonkeyPatch,
                **project_file: Any) -> Project:
    """A new project in the session's simulator (no waits unless `delays` says), the working
    directory a Pulumi project copy naming it (under `folder`), a fresh Pulumi backend beside it."""
    daemon.ensure_running(simulated_gcp.home, api_only=True)  # idle-exited: started again
    project_id = project_file.pop("project", None) or _project_id()
    answer = _request(f"{simulated_gcp.url}/trainctl-sim/v1/projects", "POST",
                      {"project": project_id, "default_delay": 0.0, **project_file})
    assert answer[0] == 200, answer
    root = _project_copy(folder / "project", project_id)
    monkeypatch.chdir(root)
    (folder / "pulumi-backend").mkdir()
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{folder / 'pulumi-backend'}")
    return Project(project_id, simulated_gcp, root)


def forget_stacks(simulated_gcp: SimulatedGcp) -> None:
    """The trainctl state of the stacks a project's test made."""
    for directory in ("stacks", "trash"):
        shutil.rmtree(simulated_gcp.trainctl_home / directory, ignore_errors=True)


@contextlib.contextmanager
def shared_project(request: pytest.FixtureRequest, name: str) -> Iterator[tuple[SimulatedGcp, Project]]:
    """A new project for a module's tests to share (new_project outside a test's own fixtures):
    the stacks' trainctl state and the project's folder are removed afterwards."""
    simulated = request.getfixturevalue("simulated_gcp")
    folder = request.getfixturevalue("tmp_path_factory").mktemp(name)
    with pytest.MonkeyPatch.context() as monkeypatch:
        try:
            yield simulated, new_project(simulated, folder, monkeypatch)
        finally:
            forget_stacks(simulated)
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def make_gcp(simulated_gcp: SimulatedGcp, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Project]]:
    """make_gcp(**project_file) -> new_project(...) for this test; the stacks' trainctl state is
    removed afterwards."""
    made: list[Project] = []

    def make(**project_file: Any) -> Project:
        assert not made, "one project per test: its stack files name it"
        made.append(new_project(simulated_gcp, tmp_path, monkeypatch, **project_file))
        return made[0]

    yield make
    forget_stacks(simulated_gcp)


@pytest.fixture
def gcp(make_gcp: Callable[..., Project]) -> Project:
    """A prepared project (the accelerator quotas the stacks need), no operation waits."""
    return make_gcp()
