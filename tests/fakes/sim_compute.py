"""What the Compute and TPU simulator tests share: a simulated project with both APIs on and no
waiting (every delay 0, unless a test asks for time to pass), a machine backend that records
what it was asked (the real one needs root; its own tests live with it), the real client
classes pointed at the simulator, and a stack-like network.

    from tests.fakes.sim_compute import csim, PROJECT  # noqa: F401   (the fixture)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pytest

from gcpsim.machines import ApiOnly, FirewallRule, Machine
from tests.fakes.sim_fixtures import PROJECT, RunningSim, start_sim

C = TypeVar("C")
ZONE, REGION = "us-central1-a", "us-central1"
TPU_ZONE, TPU_REGION = "us-west4-a", "us-west4"


class RecordingBackend(ApiOnly):
    """The API-only backend, remembering each call (what a real backend would have done)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.machines: dict[str, Machine] = {}

    def boot(self, machine: Machine) -> None:
        self.calls.append(("boot", machine.key))
        self.machines[machine.key] = machine

    def stop(self, key: str) -> None:
        self.calls.append(("stop", key))

    def delete(self, key: str) -> None:
        self.calls.append(("delete", key))
        self.machines.pop(key, None)

    def announce_preemption(self, key: str) -> None:
        self.calls.append(("announce_preemption", key))

    def announce_maintenance(self, key: str, event: str) -> None:
        self.calls.append(("announce_maintenance", (key, event)))

    def set_metadata(self, machine: Machine) -> None:
        self.calls.append(("set_metadata", machine.key))
        self.machines[machine.key] = machine

    def apply_firewall(self, network: str, rules: list[FirewallRule], caller_ip: str) -> None:
        self.calls.append(("apply_firewall", (network, tuple(rules), caller_ip)))

    def remove_network(self, network: str) -> None:
        self.calls.append(("remove_network", network))

    def called(self, verb: str) -> list[Any]:
        return [arg for v, arg in self.calls if v == verb]


class ComputeSim:
    def __init__(self, running: RunningSim, backend: RecordingBackend) -> None:
        self.running, self.backend, self.project = running, backend, running.project

    def http(self, verb: str, path: str, body: Any = None) -> tuple[int, Any]:
        return self.running.http(verb, path, body)

    def compute(self, path: str) -> str:
        return f"/compute/v1/projects/{self.project}/{path}"

    def client(self, cls: Callable[..., C]) -> C:
        """The real client class, pointed at the simulator (operation polling included)."""
        return self.running.client(cls)

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass in the simulated world (tickers and due operations run)."""
        with self.running.simulator.store.transaction(now=time.time() + seconds):
            pass

    def admin(self, verb: str, path: str, body: Any = None) -> Any:
        status, answer = self.http(verb, f"/trainctl-sim/v1/projects/{self.project}/{path}", body)
        assert status == 200, answer
        return answer

    def network(self, name: str = "vpc", region: str = REGION, cidr: str = "10.128.0.0/20",
                source_ranges: tuple[str, ...] = ("203.0.113.0/24",)) -> None:
        """A network as the program declares one: custom mode, one subnetwork, an SSH rule."""
        for path, body in ((self.compute("global/networks"), {"name": name, "autoCreateSubnetworks": False}),
                           (self.compute(f"regions/{region}/subnetworks"),
                            {"name": f"{name}-subnet", "network": f"projects/{self.project}/global/networks/{name}",
                             "ipCidrRange": cidr}),
                           (self.compute("global/firewalls"),
                            {"name": f"{name}-ssh", "network": f"projects/{self.project}/global/networks/{name}",
                             "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}],
                             "sourceRanges": list(source_ranges), "targetTags": ["node"]})):
            status, answer = self.http("POST", path, body)
            assert status == 200, answer


def instance_body(name: str, *, machine: str = "n1-standard-8", zone: str = ZONE, subnet: str = "vpc-subnet",
                  gpu: tuple[str, int] | None = None, spot: bool = False, external: bool = True,
                  image: str = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts",
                  metadata: dict[str, str] | None = None, labels: dict[str, str] | None = None,
                  project: str = PROJECT, **extra: Any) -> dict[str, Any]:
    """An instances.insert body as the Terraform provider sends the program's instances."""
    region = zone.rsplit("-", 1)[0]
    scheduling: dict[str, Any] = {"provisioningModel": "STANDARD", "automaticRestart": True,
                                  "onHostMaintenance": "TERMINATE" if gpu or machine.startswith(("g2", "a2", "a3"))
                                  else "MIGRATE"}
    if spot:
        scheduling = {"provisioningModel": "SPOT", "preemptible": True, "automaticRestart": False,
                      "onHostMaintenance": "TERMINATE", "instanceTerminationAction": "DELETE"}
    body: dict[str, Any] = {
        "name": name, "machineType": f"projects/{project}/zones/{zone}/machineTypes/{machine}",
        "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
            "sourceImage": image, "diskSizeGb": "100",
            "diskType": f"projects/{project}/zones/{zone}/diskTypes/pd-balanced"}}],
        "networkInterfaces": [{"subnetwork": f"projects/{project}/regions/{region}/subnetworks/{subnet}",
                               "accessConfigs": [{"type": "ONE_TO_ONE_NAT"}] if external else []}],
        "scheduling": scheduling, "tags": {"items": ["node"]},
        "metadata": {"items": [{"key": k, "value": v} for k, v in (metadata or {"enable-guest-attributes": "TRUE"}).items()]},
        "labels": labels or {"managed-by": "trainctl"},
        "serviceAccounts": [{"email": f"nodes@{project}.iam.gserviceaccount.com",
                             "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}], **extra}
    if gpu:
        body["guestAccelerators"] = [{"acceleratorType": f"projects/{project}/zones/{zone}/acceleratorTypes/{gpu[0]}",
                                      "acceleratorCount": gpu[1]}]
    return body


@pytest.fixture
def make_csim(tmp_path: Path) -> Iterator[Callable[..., ComputeSim]]:
    started: list[RunningSim] = []

    def make(**project_file: Any) -> ComputeSim:
        backend = RecordingBackend()
        running = start_sim(tmp_path / f"csim{len(started)}", backend, **project_file)
        started.append(running)
        running.enable("compute.googleapis.com", "tpu.googleapis.com")
        return ComputeSim(running, backend)

    yield make
    for running in started:
        running.simulator.stop()


@pytest.fixture
def csim(make_csim: Callable[..., ComputeSim]) -> ComputeSim:
    return make_csim()
