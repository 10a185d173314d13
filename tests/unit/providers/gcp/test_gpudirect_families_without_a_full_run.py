"""What set the GPUDirect VM families apart in their full simulated runs (tests/e2e/
test_gpudirect_stack_on_the_simulator.py ran a training per family), proved without one: each
family's 2 VMs pass the quota preflight on their own GPU-family quota, 16 GPUs, read from the
simulated project; and the bootstrap plan of each family's simulated nodes has the `gpunet` step,
which runs (installing nothing) and says what it left out. Their networks, NICs and placement
policy are proved on the program's plan (test_gpudirect_networks_as_documented.py) and through
its Pulumi run against the simulator (test_pulumi_program_on_the_simulator.py,
test_a4_program_on_the_simulator.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bootstrap.plan import BootstrapSpec, plan
from infra.providers.gcp import quota
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from infra.providers.inventory import Inventory, Node
from infra.spec.stack_config import load_stack
from tests.fakes.sim_compute import PROJECT, REGION, make_csim  # noqa: F401 (a fixture)
from tests.unit.bootstrap.test_gpudirect_plugin_step import KEY

# stack -> the GPU-family quota its 2 x 8 GPUs count in (the keys the full runs' logs showed)
FAMILIES = {
    "gpu-a3mega-x2": "GPUS_PER_GPU_FAMILY:NVIDIA_H100_MEGA",
    "gpu-a3ultra-x2": "GPUS_PER_GPU_FAMILY:NVIDIA_H200",
    "gpu-a4-x2": "GPUS_PER_GPU_FAMILY:NVIDIA_B200",
}


@pytest.mark.parametrize("stack", sorted(FAMILIES))
def test_each_familys_two_vms_pass_the_preflight_on_their_gpu_family_quota(stack, make_csim, monkeypatch):
    family = FAMILIES[stack]
    sim = make_csim(quotas={"global": {"GPUS_ALL_REGIONS": 64}, REGION: {family: 16}})
    sim.running.enable("cloudquotas.googleapis.com")
    monkeypatch.setenv(API_ENDPOINT_ENV, sim.running.url)
    said: list[str] = []
    quota.preflight(load_stack(stack, overrides={"project": PROJECT}), said.append)
    assert f"{family} ({REGION}) 16" in said[-1] and said[-1].endswith("available"), said


@pytest.mark.parametrize("stack", sorted(FAMILIES))
def test_each_familys_simulated_nodes_run_a_gpunet_step_that_installs_nothing(stack, tmp_path: Path):
    spec = load_stack(stack)
    nodes = tuple(Node(name=f"node-{i}", rank=i, internal_ip=f"10.0.0.{i + 2}", ssh_host=f"10.0.0.{i + 2}",
                       ssh_user="trainctl", host_keys=(KEY,), workdir="/w",
                       machine_type=spec.machine_type, accelerator="cpu",
                       simulates=spec.accelerator) for i in range(2))
    inventory = Inventory(stack=stack, provider="gcp", bucket_uri="gs://b", nodes=nodes,
                          ssh_private_key="/k", known_hosts="/kh")
    for node_plan in plan(inventory, BootstrapSpec(code_dir=tmp_path)):
        (step,) = [s for s in node_plan.steps if s.name == "gpunet"]
        done = subprocess.run(["bash", "-c", str(step.command)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "simulated node (no GPU, no GPU NICs)" in done.stdout and "not installed" in done.stdout, done.stdout
