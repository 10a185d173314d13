"""The reaper against a simulated project: the APIs a project never enabled, GKE's own VMs, and
items that are already gone must not stop it from deleting what expired."""

from __future__ import annotations

import time

import pytest

from infra.providers.gcp import reaper
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from tests.fakes.sim_compute import PROJECT, RecordingBackend, ComputeSim, instance_body
from tests.fakes.sim_fixtures import start_sim

EXPIRED = {"managed-by": "trainctl", "trainctl-stack": "old", "trainctl-expires": str(int(time.time()) - 60)}
FRESH = {**EXPIRED, "trainctl-stack": "new", "trainctl-expires": str(int(time.time()) + 3600)}


@pytest.fixture
def compute_only(tmp_path, monkeypatch):
    """A project where only Compute is on (TPU and GKE never enabled), as a GPU stack's is."""
    running = start_sim(tmp_path / "sim", RecordingBackend())
    running.enable("compute.googleapis.com")
    monkeypatch.setenv(API_ENDPOINT_ENV, running.url)
    sim = ComputeSim(running, running.simulator.backend)  # type: ignore[arg-type]
    sim.network()
    yield sim
    running.simulator.stop()


def _names(sim: ComputeSim) -> set[str]:
    _, body = sim.http("GET", sim.compute("aggregated/instances"))
    return {i["name"] for scope in body.get("items", {}).values() for i in scope.get("instances", [])}


def test_expired_vms_are_reaped_in_a_project_without_the_tpu_and_gke_apis(compute_only):
    sim = compute_only
    for name, labels in (("old-0", EXPIRED), ("old-1", EXPIRED), ("new-0", FRESH)):
        status, answer = sim.http("POST", sim.compute("zones/us-central1-a/instances"),
                                  instance_body(name, labels=labels))
        assert status == 200, answer
    said: list[str] = []
    expired = reaper.find_expired(PROJECT, report=said.append)
    assert sorted(e.name for e in expired) == ["old-0", "old-1"]
    assert any("TPUs" in s and "not enabled" in s for s in said)
    assert any("GKE clusters" in s and "not enabled" in s for s in said)
    reaper.delete(PROJECT, expired, said.append)
    assert _names(sim) == {"new-0"}


def test_a_gke_node_vm_goes_with_its_cluster_never_one_by_one(compute_only):
    sim = compute_only
    sim.running.enable("tpu.googleapis.com", "container.googleapis.com")
    gke_node = {**EXPIRED, "goog-gke-node": "", "goog-k8s-cluster-name": "old-gke"}
    status, answer = sim.http("POST", sim.compute("zones/us-central1-a/instances"),
                              instance_body("gke-old-gke-pool-1234", labels=gke_node))
    assert status == 200, answer
    assert reaper.find_expired(PROJECT) == []


def test_an_item_already_gone_does_not_end_the_sweep(compute_only):
    sim = compute_only
    sim.running.enable("tpu.googleapis.com", "container.googleapis.com")
    sim.http("POST", sim.compute("zones/us-central1-a/instances"), instance_body("old-0", labels=EXPIRED))
    expired = reaper.find_expired(PROJECT)
    gone = reaper.Expired("instance", "old-9", "us-central1-a", "old", 60)
    said: list[str] = []
    reaper.delete(PROJECT, [gone, *expired], said.append)
    assert "instance old-9 is already gone" in said
    assert _names(sim) == set()
