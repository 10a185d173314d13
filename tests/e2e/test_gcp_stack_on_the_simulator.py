"""A GCP stack run end to end in a simulated project: the GCP realizer, the Pulumi program and
its provider's calls, real machines behind the simulated VMs, bootstrap over SSH with host keys
from guest attributes, torchrun across the machines, checkpoints in the simulated bucket, and
nothing left afterwards."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.conftest import trainctl

pytestmark = pytest.mark.e2e


@pytest.fixture
def simulated_home(trainctl_home):
    yield trainctl_home
    from infra.providers.gcp.simulator import daemon, nodes

    sim_home = trainctl_home / "simulator"
    daemon.stop(sim_home)
    nodes.cleanup_all(sim_home)


def _leftovers(home) -> list[str]:
    from infra.providers.gcp.simulator import daemon, nodes

    sim_home = home / "simulator"
    found = nodes.leftovers(sim_home)
    if daemon.url_of(sim_home):
        found.append("the simulator service")
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    found += [line for line in ps.splitlines() if str(sim_home) in line]
    stacks = home / "stacks"
    found += [str(p) for p in stacks.iterdir()] if stacks.exists() else []
    return found


def test_a_spot_gpu_stack_trains_in_a_simulated_project_and_leaves_nothing(simulated_home, tmp_path):
    done = trainctl("run", "examples/digits-ddp.yaml", "--stack", "gpu-l4-spot", "--simulate",
                    "--runs-dir", str(tmp_path / "runs"), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = done.stdout + done.stderr
    # GCP's own steps happened: APIs enabled, the quota read, the reaper function built
    assert "quota: " in log and "PREEMPTIBLE_NVIDIA_L4_GPUS (us-central1)" in log
    assert "gcp:cloudfunctionsv2:Function" in log
    assert "simulated accelerators (gpu:1xnvidia-l4) are declared, not present" in log
    run_id = re.search(r"\[trainctl\] run (\S+):", log)[1]
    metrics = json.loads((tmp_path / "runs" / run_id / "metrics.json").read_text())
    assert metrics["test_accuracy"] >= 0.95
    assert _leftovers(simulated_home) == []
