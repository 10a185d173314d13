"""A GPUDirect stack (two a3-megagpu-8g VMs, GPUDirect-TCPXO) run end to end in a simulated
project: its nine networks per VM and its compact placement policy are created through the
provider's calls, bootstrap runs the `gpunet` step (which on a simulated node installs nothing and
says so), DDP trains across the machines on their CPUs, and nothing is left afterwards."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import trainctl
from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, simulated_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e


def test_an_a3_mega_stack_with_its_gpu_networks_trains_in_a_simulated_project_and_leaves_nothing(
        simulated_home, tmp_path):  # noqa: F811
    done = trainctl("run", "examples/digits-ddp.yaml", "--stack", "gpu-a3mega-x2", "--simulate",
                    "--runs-dir", str(tmp_path / "runs"), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = done.stdout + done.stderr
    assert "gcp:compute:ResourcePolicy" in log and "-placement created" in log
    assert len(set(re.findall(r"gcp:compute:Network \S+-gpunet-(\d) created", log))) == 8
    assert re.search(r"node-0 gpunet\s+done", log) and re.search(r"node-1 gpunet\s+done", log)
    assert "NVIDIA_H100_MEGA_GPUS (us-central1) 16" in log
    run_id = re.search(r"\[trainctl\] run (\S+):", log)[1]
    metrics = json.loads((tmp_path / "runs" / run_id / "metrics.json").read_text())
    assert metrics["test_accuracy"] >= 0.95
    assert _leftovers(simulated_home) == []
