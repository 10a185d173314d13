"""A running GCP simulator for tests: API-only machines, a temp home, one project.

    def test_x(sim):                      # the simulator, project "sim-project" (prepared)
        sim.http("GET", "/compute/v1/projects/sim-project/zones/us-central1-a/instances")
        client = sim.client(compute_v1.InstancesClient)   # the real client class, REST

Import the fixtures in a test module with `from tests.sim_fixtures import sim  # noqa: F401`,
or use `make_sim` to start one with another project file.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pytest

from gcpsim.server import Simulator

PROJECT = "sim-project"
C = TypeVar("C")


@dataclass
class RunningSim:
    simulator: Simulator
    url: str
    project: str

    def http(self, verb: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """(status, parsed JSON) of a raw request; errors are answers, not exceptions."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, method=verb, data=data,
                                         headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(request) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            return exc.code, json.loads(raw) if raw else None

    def client(self, cls: Callable[..., C]) -> C:
        """A google-cloud-* client of the real library, pointed at the simulator."""
        from google.auth.credentials import AnonymousCredentials

        from infra.providers.gcp.reaper import _operations_at

        client = cls(transport="rest", credentials=AnonymousCredentials(),
                     client_options={"api_endpoint": self.url})
        _operations_at(client, self.url)  # compute's operation polling, at the simulator too
        return client

    def create_project(self, **project_file: Any) -> str:
        status, body = self.http("POST", "/trainctl-sim/v1/projects", project_file)
        assert status == 200, body
        return project_file["project"]

    def enable(self, *services: str, project: str | None = None) -> None:
        """Services on at once, as if enabled long ago (no operation to wait for)."""
        with self.simulator.store.transaction() as world:
            p = world.project(project or self.project)
            assert p is not None
            for service in services:
                p["services"][service] = "ENABLED"


def start_sim(home: Path, backend: Any = None, **project_file: Any) -> RunningSim:
    simulator = Simulator(home, backend)
    url = simulator.start()
    running = RunningSim(simulator, url, project_file.get("project", PROJECT))
    # No operation waits unless the test names one in `delays`: a test spends its time in the
    # code under test, not in simulated GCP latency.
    running.create_project(**{"project": PROJECT, "default_delay": 0.0, **project_file})
    return running


@pytest.fixture
def make_sim(tmp_path: Path) -> Iterator[Callable[..., RunningSim]]:
    started: list[RunningSim] = []

    def make(**project_file: Any) -> RunningSim:
        running = start_sim(tmp_path / f"sim{len(started)}", **project_file)
        started.append(running)
        return running

    yield make
    for running in started:
        running.simulator.stop()


@pytest.fixture
def sim(make_sim: Callable[..., RunningSim]) -> RunningSim:
    return make_sim()
