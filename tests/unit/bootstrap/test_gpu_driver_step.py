"""The GPU driver step of bootstrap (bootstrap.plan.drivers_command) for GCE GPU VMs, run for
real in a shell whose `id`, `sudo`, `curl`, `python3` and `nvidia-smi` are stubs that record how
they were called. (Not in test_bootstrap.py: that module is end-to-end as a whole.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bootstrap.plan import drivers_command
from infra.providers.inventory import Node


def _node(tmp_path: Path, user: str) -> Node:
    return Node(name="n0", rank=0, internal_ip="10.0.0.2", ssh_host="10.0.0.2", ssh_user=user,
                host_keys=("ssh-ed25519 AAAA",), accelerator="gpu:1xnvidia-tesla-t4",
                workdir=str(tmp_path / "work"))


def _stubs(tmp_path: Path, *, uid: int, sudo_ok: bool, driver_works_after: int) -> Path:
    """Stub tools. nvidia-smi starts working once the installer has run `driver_works_after`
    times (0: already working; -1: never)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    runs = tmp_path / "installer-runs"
    scripts = {
        "id": f'[ "$1" = -u ] && echo {uid} || echo tester',
        "sudo": (f'echo "sudo $*" >> {log}; [ "$1" = -n ] || exit 99; shift; '
                 + ('exec "$@"' if sudo_ok else 'echo "sudo: a password is required" >&2; exit 1')),
        "curl": f'echo "curl $*" >> {log}',
        "python3": (f'echo "python3 $* uid=$TRAINCTL_FAKE_UID" >> {log}; '
                    f'echo x >> {runs}'),
        "nvidia-smi": (f'n=$(cat {runs} 2>/dev/null | wc -l); '
                       f'if [ {driver_works_after} -ge 0 ] && [ "$n" -ge {driver_works_after} ]; '
                       'then echo "GPU 0: Tesla T4"; else exit 9; fi'),
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return bin_dir


def _run(tmp_path: Path, command: str, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, text=True, timeout=60)


def _log(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def test_a_non_root_user_runs_the_installer_through_sudo_n(tmp_path: Path) -> None:
    command, _ = drivers_command(_node(tmp_path, "trainctl"))
    bin_dir = _stubs(tmp_path, uid=1000, sudo_ok=True, driver_works_after=1)
    result = _run(tmp_path, command, bin_dir)
    assert result.returncode == 0, result.stderr
    installer = [c for c in _log(tmp_path) if "install_driver" in c]
    assert installer and all(c.startswith("sudo -n python3 ") for c in installer if c.startswith("sudo"))
    assert any(c.startswith("sudo -n python3 /tmp/cuda_installer.pyz install_driver") for c in installer)


def test_root_runs_the_installer_directly(tmp_path: Path) -> None:
    command, _ = drivers_command(_node(tmp_path, "root"))
    bin_dir = _stubs(tmp_path, uid=0, sudo_ok=False, driver_works_after=1)
    result = _run(tmp_path, command, bin_dir)
    assert result.returncode == 0, result.stderr
    assert not [c for c in _log(tmp_path) if c.startswith("sudo")]
    assert any(c.startswith("python3 /tmp/cuda_installer.pyz install_driver") for c in _log(tmp_path))


def test_sudo_wanting_a_password_fails_clearly_without_installing(tmp_path: Path) -> None:
    command, _ = drivers_command(_node(tmp_path, "trainctl"))
    bin_dir = _stubs(tmp_path, uid=1000, sudo_ok=False, driver_works_after=1)
    result = _run(tmp_path, command, bin_dir)
    assert result.returncode not in (0, 75)
    assert "passwordless sudo" in result.stderr
    assert not [c for c in _log(tmp_path) if "install_driver" in c]


@pytest.mark.parametrize("user,uid", [("trainctl", 1000), ("root", 0)])
def test_a_driver_that_never_works_asks_for_bounded_reboots_then_fails(tmp_path: Path, user: str,
                                                                          uid: int) -> None:
    """Each exit 75 makes the runner reboot and rerun the step; the count of reboots is kept on
    the node (it survives the reboot), so the step gives up with a message instead of looping."""
    command, _ = drivers_command(_node(tmp_path, user))
    bin_dir = _stubs(tmp_path, uid=uid, sudo_ok=True, driver_works_after=-1)
    codes = [_run(tmp_path, command, bin_dir).returncode for _ in range(5)]
    assert codes == [75, 75, 5, 5, 5]  # two reboots asked for, then a clear failure every time
    final = _run(tmp_path, command, bin_dir)
    assert final.returncode == 5 and "after 2 reboot(s)" in final.stderr


def test_a_working_driver_is_left_alone(tmp_path: Path) -> None:
    command, _ = drivers_command(_node(tmp_path, "trainctl"))
    bin_dir = _stubs(tmp_path, uid=1000, sudo_ok=True, driver_works_after=0)
    result = _run(tmp_path, command, bin_dir)
    assert result.returncode == 0 and "already working" in result.stdout
    assert not [c for c in _log(tmp_path) if "install_driver" in c]
