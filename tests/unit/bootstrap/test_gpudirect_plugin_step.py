"""Bootstrap's `gpunet` step on GPUDirect VMs: the plugin the family needs, installed as root
(sudo -n for GCE's non-root SSH user), run for real in a shell whose `id`, `sudo` and `docker`
are stubs that record their calls; recorded by fingerprint like every step. Other nodes have no
such step; a simulated node's step installs nothing and says so. On A3 Mega (GPUDirect-TCPXO) the
step first loads the dmabuf import helper module and makes /dev/aperture_devices, as Google's A3
Mega images do (Cluster Toolkit a3mega-slurm-*.yaml), each part skipped where it is done."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bootstrap.gpunet import gpunet_command
from bootstrap.plan import BootstrapSpec, plan
from infra.providers.inventory import Inventory, Node
from infra.spec.gpu_host import APERTURE_RULE

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"


def node(machine: str, accelerator: str = "gpu:8xnvidia-h100-mega-80gb", simulated: bool = False) -> Node:
    return Node(name="n0", rank=0, internal_ip="10.0.0.2", ssh_host="10.0.0.2", ssh_user="trainctl",
                host_keys=(KEY,), workdir="/w", machine_type=machine,
                accelerator="cpu" if simulated else accelerator, simulates=accelerator if simulated else None)


def host_stubs(tmp_path: Path, *, dkms_installed: bool, rule_written: bool, devices_after: str) -> dict[str, str]:
    """The A3 Mega host's tools: `dkms status`, the rule file as `cmp` finds it, and when
    /dev/aperture_devices has entries (`ls`): "boot" (already), "trigger" (after udev replays the
    devices' add events), "never". `tee` keeps what it was given, beside the log."""
    log, triggered = tmp_path / "calls.log", tmp_path / "triggered"
    shows = {"boot": "true", "trigger": f"[ -f {triggered} ]", "never": "false"}[devices_after]
    return {"dkms": "echo 'dmabuf-import-helper/1.1, 6.8.0-1015-gcp, x86_64: installed'" if dkms_installed else "true",
            "modprobe": f'echo "modprobe $*" >> {log}',
            "tee": f'echo "tee $*" >> {log}; cat > {tmp_path}/"$(basename "$1")"',
            "cmp": "cat >/dev/null; " + ("exit 0" if rule_written else "exit 1"),
            "update-initramfs": f'echo "update-initramfs $*" >> {log}',
            "udevadm": f'echo "udevadm $*" >> {log}; [ "$1" = trigger ] && touch {triggered}; true',
            "ls": f"{shows} && echo 0000:06:00.1; true",
            "apt-get": f'echo "apt-get $*" >> {log}'}


def run_with_stubs(tmp_path: Path, command: str, extra: dict[str, str] | None = None,
                   check: bool = True) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for name, body in {"id": '[ "$1" = -u ] && echo 1000 || echo trainctl',
                       "sudo": f'echo "sudo $1" >> {log}; shift; exec "$@"',
                       "docker": f'echo "docker $*" >> {log}', **(extra or {})}.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    done = subprocess.run(["bash", "-c", command], env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
                          capture_output=True, text=True)
    (tmp_path / "stderr").write_text(done.stderr)
    if check:
        assert done.returncode == 0, done.stderr
    return log.read_text().splitlines() if log.exists() else []


def test_a3_mega_installs_the_tcpxo_plugin_and_starts_its_receive_data_path_manager_as_root(tmp_path):
    command, _ = gpunet_command(node("a3-megagpu-8g"))
    calls = run_with_stubs(tmp_path, command,
                           host_stubs(tmp_path, dkms_installed=True, rule_written=True, devices_after="boot"))
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


def inventory_of(*nodes: Node) -> Inventory:
    return Inventory(stack="s", provider="gcp", bucket_uri="gs://b", nodes=nodes, ssh_private_key="/k", known_hosts="/kh")


def gpunet_of(tmp_path: Path, n: Node) -> str | None:
    (node_plan,) = plan(inventory_of(n), BootstrapSpec(code_dir=tmp_path))
    steps = {s.name: str(s.command) for s in node_plan.steps}
    return steps.get("gpunet")


def test_only_a3_mega_plans_the_import_helper_and_the_aperture_devices(tmp_path):
    planned = gpunet_of(tmp_path, node("a3-megagpu-8g"))
    assert "modprobe import-helper" in planned and "/etc/udev/rules.d/00-a3-megagpu.rules" in planned
    # Where dkms has no such module: Google's DKMS package from Google's TCPXO apt repository.
    assert "ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-tcpxo-apt main" in planned
    assert 'apt-get install -y dkms "linux-headers-$(uname -r)" dmabuf-import-helper; fi' in planned
    for other, gpu in [("a3-highgpu-8g", "gpu:8xnvidia-h100-80gb"), ("a3-ultragpu-8g", "gpu:8xnvidia-h200-141gb"),
                       ("a4-highgpu-8g", "gpu:8xnvidia-b200")]:
        planned = gpunet_of(tmp_path, node(other, gpu))
        assert "import-helper" not in planned and "aperture" not in planned, other
    assert gpunet_of(tmp_path, node("a2-highgpu-8g", "gpu:8xnvidia-tesla-a100")) is None


def test_a3_mega_loads_the_import_helper_and_writes_googles_udev_rule_before_the_plugin(tmp_path):
    command, _ = gpunet_command(node("a3-megagpu-8g"))
    calls = run_with_stubs(tmp_path, command,
                           host_stubs(tmp_path, dkms_installed=True, rule_written=False, devices_after="trigger"))
    host = [c for c in calls if not c.startswith(("sudo", "docker"))]
    assert host == ["modprobe import-helper", "tee /etc/modules-load.d/import-helper.conf",
                    "tee /etc/udev/rules.d/00-a3-megagpu.rules", "update-initramfs -u -k all",
                    "udevadm control --reload-rules",
                    "udevadm trigger --action=add --subsystem-match=pci --attr-match=vendor=0x1ae0 "
                    "--attr-match=device=0x0084", "udevadm settle"]
    assert calls.index("udevadm settle") < min(i for i, c in enumerate(calls) if c.startswith("docker run"))
    assert (tmp_path / "00-a3-megagpu.rules").read_text() == "\n".join(APERTURE_RULE) + "\n"
    assert (tmp_path / "import-helper.conf").read_text() == "import-helper\n"
    assert not any(c.startswith("apt-get") for c in calls)  # dkms has the module: nothing installed


def test_on_a_prepared_a3_mega_host_the_rule_and_the_devices_are_left_as_they_are(tmp_path):
    command, _ = gpunet_command(node("a3-megagpu-8g"))
    calls = run_with_stubs(tmp_path, command,
                           host_stubs(tmp_path, dkms_installed=True, rule_written=True, devices_after="boot"))
    assert not [c for c in calls if c.startswith(("apt-get", "update-initramfs", "udevadm", "tee /etc/udev"))]
    assert "modprobe import-helper" in calls  # a no-op where it is loaded


def test_an_a3_mega_vm_without_aperture_devices_fails_the_step_saying_so(tmp_path):
    command, _ = gpunet_command(node("a3-megagpu-8g"))
    calls = run_with_stubs(tmp_path, command, check=False,
                           extra=host_stubs(tmp_path, dkms_installed=True, rule_written=False, devices_after="never"))
    assert "no aperture devices (PCI 1ae0:0084) under /dev/aperture_devices" in (tmp_path / "stderr").read_text()
    assert not [c for c in calls if c.startswith("docker run")]


def test_a_simulated_a3_mega_node_says_it_sets_up_neither_the_module_nor_the_devices(tmp_path):
    command, _ = gpunet_command(node("a3-megagpu-8g", simulated=True))
    assert run_with_stubs(tmp_path, command, host_stubs(tmp_path, dkms_installed=False, rule_written=False,
                                                        devices_after="never")) == []
    assert "simulated node (no GPU, no GPU NICs)" in command
    assert "dmabuf-import-helper kernel module" in command and "/dev/aperture_devices" in command
