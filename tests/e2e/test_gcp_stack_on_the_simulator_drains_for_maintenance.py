"""The maintenance drain on a GCP stack in a simulated project: the simulator announces host
maintenance on a spot GPU VM as GCE does (TERMINATE_ON_HOST_MAINTENANCE: GPU VMs cannot migrate),
trainctl drains the node, the simulator stops it after the notice, the GCP realizer starts it
again (instances.start) and the run ends with the undisturbed run's step count."""

from __future__ import annotations

import json
import urllib.request

import pytest

from conftest import Streamed, experiment, run_id_of
from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, simulated_home  # noqa: F401 (a fixture)
from tests.reliability.test_spot_recovery import EPOCHS, SPOT, finished_as_undisturbed, undisturbed_metrics

pytestmark = pytest.mark.e2e

STACK, PROJECT, ZONE = "gpu-l4-spot", "my-project", "us-central1-a"  # stacks/Pulumi.gpu-l4-spot.yaml


def on_the_simulated_stack(tmp_path, name: str, args: str):
    path = experiment(tmp_path, args, nodes=2, name=name, extra=SPOT)
    path.write_text(path.read_text().replace("stack: local", f"stack: {STACK}"))
    return path


def started(experiment_file, runs, simulated_home, point: str) -> tuple[Streamed, str, str, str]:  # noqa: F811
    """`trainctl run --simulate` of the file once its output reached `point`: the run, its id,
    its second node and the simulator's address."""
    from infra.providers import realizers
    from gcpsim import daemon

    run = Streamed("run", str(experiment_file), "--simulate", "--runs-dir", str(runs))
    run.wait_for(r"\[trainctl\] run ")
    run_id = run_id_of("".join(run.seen))
    run.wait_for(point)
    simulator = daemon.url_of(simulated_home / "simulator")
    assert simulator is not None
    return run, run_id, realizers.inventory(run_id).nodes[1].name, simulator


def announce(simulator: str, instance: str, notice: float) -> dict:
    request = urllib.request.Request(
        f"{simulator}/trainctl-sim/v1/projects/{PROJECT}/zones/{ZONE}/instances/{instance}:maintenance",
        data=json.dumps({"notice_seconds": notice}).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)


def test_a_gpu_vm_announcing_maintenance_is_drained_and_the_run_ends_as_an_undisturbed_one(simulated_home,  # noqa: F811
                                                                                            tmp_path):
    runs = tmp_path / "runs"
    undisturbed = undisturbed_metrics(on_the_simulated_stack(tmp_path, "calm", EPOCHS))
    run, run_id, node, simulator = started(on_the_simulated_stack(tmp_path, "maint", f"{EPOCHS} --epoch-sleep 2"),
                                           runs, simulated_home, r"epoch 2/6")
    assert announce(simulator, node, notice=3)["event"] == "TERMINATE_ON_HOST_MAINTENANCE"
    run.wait_for(rf"{node}: TERMINATE_ON_HOST_MAINTENANCE announced: draining it")
    run.wait_for(rf"recovery 1: recreating {node}")
    output, result = finished_as_undisturbed(run, runs / run_id, undisturbed)
    assert [r["nodes"] for r in result["recoveries"]] == [[node]] and result["recoveries"][0]["steps_redone"] == 0
    assert [(e["node"], e["event"]) for e in result["maintenance_events"]] == [(node, "TERMINATE_ON_HOST_MAINTENANCE")]
    assert _leftovers(simulated_home) == []
