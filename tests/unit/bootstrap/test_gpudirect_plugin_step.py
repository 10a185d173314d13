"""Bootstrap's `gpunet` step on GPUDirect VMs: the plugin the family needs, installed as root
(sudo -n for GCE's non-root SSH user), run for real in a shell whose `id`, `sudo` and `docker`
are stubs that record their calls; recorded by fingerprint like every step. Other nodes have no
such step; a simulated node's step installs nothing and says so."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bootstrap.gpunet import gpunet_command
from bootstrap.plan import BootstrapSpec, plan
from infra.providers.inventory import Inventory, Node

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"


def node(machine: str, accelerator: str = "gpu:8xnvidia-h100-mega-80gb", simulated: bool = False) -> Node:
    return Node(name="n0", rank=0, internal_ip="10.0.0.2", ssh_host="10.0.0.2", ssh_user="trainctl",
                host_keys=(KEY,), workdir="/w", machine_type=machine,
                accelerator="cpu" if simulated else accelerator, simulates=accelerator if simulated else None)


def run_with_stubs(tmp_path: Path, command: str) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for name, body in {"id": '[ "$1" = -u ] && echo 1000 || echo trainctl',
                       "sudo": f'echo "sudo $1" >> {log}; shift; exec "$@"',
                       "docker": f'echo "docker $*" >> {log}'}.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    subprocess.run(["bash", "-c", command], check=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    return log.read_text().splitlines() if log.exists() else []


def test_a3_mega_installs_the_tcpxo_plugin_and_starts_its_receive_data_path_manager_as_root(tmp_path):
    command, _ = gpunet_command(node("a3-megagpu-8g"))
    calls = run_with_stubs(tmp_path, command)
    assert calls[0] == "sudo -n"
    installs = [c for c in calls if c.startswith("docker run")]
    assert "gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev" in installs[0] and "install --install-nccl" in installs[0]
    assert "gpudirect-tcpxo/tcpgpudmarxd-dev" in installs[1] and "--num_nics=8" in installs[1]


def test_the_step_is_planned_after_drivers_and_recorded_by_fingerprint(tmp_path):
    inv = Inventory(stack="s", provider="gcp", bucket_uri="gs://b", nodes=(node("a4-highgpu-8g", "gpu:8xnvidia-b200"),),
                    ssh_private_key="/k", known_hosts="/kh")
    (node_plan,) = plan(inv, BootstrapSpec(code_dir=tmp_path))
    names = [s.name for s in node_plan.steps]
    assert names.index("gpunet") == names.index("drivers") + 1
    step = node_plan.steps[names.index("gpunet")]
    assert "nccl-gib" in str(step.command)
    assert str(step.command).endswith(f"echo {step.fingerprint} > /w/.trainctl/fp/gpunet")


def test_other_nodes_have_no_gpunet_step_and_simulated_ones_install_nothing(tmp_path):
    assert gpunet_command(node("a2-highgpu-8g", "gpu:8xnvidia-tesla-a100")) is None
    assert gpunet_command(node("a3-megagpu-8g", "cpu")) is None
    command, _ = gpunet_command(node("a3-megagpu-8g", simulated=True))
    assert run_with_stubs(tmp_path, command) == []  # no sudo, no docker
    assert "not installed" in command
