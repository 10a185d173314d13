"""A GKE stack end to end in a simulated project, as a user runs it: `up` creates the cluster and
its node pool in the simulator, `run` trains the digits DDP example as an Indexed Job on a
simulated cluster (pods as processes, torchrun's c10d rendezvous through the names the headless
Service publishes, checkpoints in the simulated bucket) to the accuracy bar, and `down` deletes
the cluster objects and leaves nothing: no cluster, node, pod process, or simulator service."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.conftest import trainctl
from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, simulated_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e

ZONE = "us-central1-a"  # stacks/Pulumi.gke-l4.yaml
PROJECT = "my-project"


def clusters(home) -> dict:
    world = json.loads((home / "simulator" / "world.json").read_text())
    return world["projects"][PROJECT].get("collections", {}).get("clusters", {})


def instances(home) -> list[str]:
    world = json.loads((home / "simulator" / "world.json").read_text())
    return sorted(world["projects"][PROJECT].get("collections", {}).get("compute.instances", {}))


def test_up_run_and_down_of_a_gke_stack_in_a_simulated_project(simulated_home, tmp_path):
    up = trainctl("up", "--stack", "gke-l4", "--simulate", timeout=600)
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    cluster = clusters(simulated_home)[f"{ZONE}/gke-l4-gke"]
    assert cluster["status"] == "RUNNING" and cluster["endpoint"].startswith("127.")
    assert list(cluster["pools"]) == ["gke-l4-pool"] and len(cluster["pools"]["gke-l4-pool"]["nodes"]) == 2
    assert len(instances(simulated_home)) == 2  # the pool's nodes, as Compute instances

    run = trainctl("run", "examples/digits-ddp.yaml", "--stack", "gke-l4", "--simulate",
                   "--runs-dir", str(tmp_path / "runs"), timeout=900)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    assert "is a process on this machine, not a container" in log
    assert "accelerators requested (nvidia.com/gpu=1) are declared, not present" in log
    run_id = re.search(r"\[trainctl\] run (\S+):", log)[1]
    metrics = json.loads((tmp_path / "runs" / run_id / "metrics.json").read_text())
    assert metrics["test_accuracy"] >= 0.95
    assert list(clusters(simulated_home)) == [f"{ZONE}/gke-l4-gke"]  # the run's own cluster went

    down = trainctl("down", "--stack", "gke-l4", timeout=600)
    assert down.returncode == 0, down.stdout[-3000:] + down.stderr[-3000:]
    assert clusters(simulated_home) == {} and instances(simulated_home) == []
    deadline = time.monotonic() + 15  # the simulator service leaves once idle: a moment after the down
    while (left := _leftovers(simulated_home)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == [], "\n".join(left)
