"""Simulated GCE machines boot as a GCE image does from their metadata: users from ssh-keys
with passwordless sudo, host keys published as guest attributes, the startup script run; they
keep their disk across a stop, lose it on delete, and are preempted as GCE preempts."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import paramiko
import pytest

from namespace_nodes import keys
from gcpsim import image
from tests.fakes.sim_machines_fixtures import SimMachines, sim_machines, wait_for  # noqa: F401

pytestmark = pytest.mark.e2e


def host_files() -> str:
    return "".join(hashlib.sha256(Path(f).read_bytes()).hexdigest()
                   for f in ("/etc/passwd", "/etc/group", "/etc/shadow"))


def test_metadata_users_log_in_with_pinned_host_keys_and_have_passwordless_sudo(sim_machines):  # noqa: F811
    before = host_files()
    vm0, vm1 = sim_machines.boot(sim_machines.machine("vm0"), sim_machines.machine("vm1"))
    for vm in (vm0, vm1):
        who, sudo, groups = sim_machines.ssh(vm, "hostname; sudo -n true && echo sudo-ok; id -Gn").splitlines()
        assert (who, sudo) == (vm.name, "sudo-ok") and "google-sudoers" in groups.split()
    assert sim_machines.ssh(vm0, "stat -c %U:%a /home/trainctl; touch /home/trainctl/w && echo writable") == \
        "trainctl:755\nwritable\n"
    assert host_files() == before  # the users exist on the machines only
    other = keys.write_ed25519_keypair(sim_machines.home / "other" / "key", "x").split()
    with pytest.raises(paramiko.BadHostKeyException):
        sim_machines.client(vm0, pinned=[{"key": other[0], "value": other[1]}])


def test_the_startup_script_runs_as_root_and_its_output_reaches_the_console(sim_machines):  # noqa: F811
    vm, = sim_machines.boot(sim_machines.machine("vm0"))
    assert sim_machines.ssh(vm, "sudo cat /root/startup-ran") == "0\n"
    console = wait_for(lambda: "startup-script exit status 0" in sim_machines.console(vm)
                       and sim_machines.console(vm), what="startup script finished")
    assert "startup-script: started by root" in console


def test_declared_accelerators_are_stated_on_the_machine_and_no_nvidia_smi_is_found(sim_machines):  # noqa: F811
    gpu, cpu = sim_machines.boot(sim_machines.machine("gpu", accelerators={"nvidia-l4": 1}),
                                 sim_machines.machine("cpu"))
    stated = sim_machines.ssh(gpu, "cat /etc/trainctl-simulated-accelerators; cat /etc/motd")
    assert "nvidia-l4 1" in stated.splitlines() and "are simulated" in stated
    assert sim_machines.ssh(gpu, "command -v nvidia-smi || echo none") == "none\n"
    assert sim_machines.ssh(cpu, "ls /etc/trainctl-simulated-accelerators 2>/dev/null || echo none") == "none\n"


def test_keys_added_to_metadata_create_users_and_removed_keys_revoke_them(sim_machines):  # noqa: F811
    vm, = sim_machines.boot(sim_machines.machine("vm0"))
    sim_machines.ssh(vm, "true")
    alice_key = sim_machines.home / "alice" / "key"
    alice = keys.write_ed25519_keypair(alice_key, "alice")
    with_alice = dataclasses.replace(vm, metadata={**vm.metadata,
                                                   "ssh-keys": vm.metadata["ssh-keys"] + f"\nalice:{alice} alice"})
    sim_machines.backend.set_metadata(with_alice)
    assert wait_for(lambda: _logs_in(sim_machines, vm, "alice", alice_key), what="alice can log in")
    sim_machines.backend.set_metadata(vm)
    wait_for(lambda: not _logs_in(sim_machines, vm, "alice", alice_key), what="alice is refused")
    assert "google-sudoers" not in sim_machines.ssh(vm, "id -Gn alice")


def _logs_in(sim: SimMachines, vm, user: str, key: Path) -> bool:
    try:
        sim.client(vm, user=user, key=key).close()
        return True
    except paramiko.AuthenticationException:
        return False


def test_os_login_and_blocked_project_keys_keep_metadata_keys_out(sim_machines):  # noqa: F811
    bob_key = sim_machines.home / "bob" / "key"
    project = {"ssh-keys": f"bob:{keys.write_ed25519_keypair(bob_key, 'bob')} bob"}
    open_ = sim_machines.machine("open", project_metadata=project)
    blocked = sim_machines.machine("blocked", project_metadata=project)
    oslogin = sim_machines.machine("oslogin", project_metadata=project)
    open_ = dataclasses.replace(open_, metadata={**open_.metadata, "block-project-ssh-keys": "FALSE"})
    oslogin = dataclasses.replace(oslogin, metadata={**oslogin.metadata, "enable-oslogin": "TRUE"})
    sim_machines.boot(open_, blocked, oslogin)
    assert _logs_in(sim_machines, open_, "bob", bob_key)
    assert not _logs_in(sim_machines, blocked, "bob", bob_key)
    assert not _logs_in(sim_machines, oslogin, "trainctl", sim_machines.key)
    assert "OS Login is enabled" in sim_machines.console(oslogin)


def test_stop_keeps_the_disk_start_boots_it_again_and_delete_erases_it(sim_machines):  # noqa: F811
    vm, = sim_machines.boot(sim_machines.machine("vm0"))
    first_key = sim_machines.host_keys(vm)
    sim_machines.ssh(vm, "echo kept > ~/file; sleep 6061 >/dev/null 2>&1 &")
    sim_machines.backend.stop(vm.key)
    assert "sleep 6061" not in subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    with pytest.raises(OSError) as refused:  # its address is unreachable at once, not routed elsewhere
        socket.create_connection((vm.external_ip, 22), timeout=2)
    assert refused.value.errno == errno.EHOSTUNREACH
    sim_machines.backend.boot(vm)
    assert sim_machines.host_keys(vm) == first_key
    assert sim_machines.ssh(vm, "cat ~/file; pgrep -c sleep || true") == "kept\n0\n"
    sim_machines.backend.delete(vm.key)
    sim_machines.backend.boot(vm)
    assert sim_machines.host_keys(vm) != first_key
    assert sim_machines.ssh(vm, "cat ~/file 2>/dev/null || echo gone") == "gone\n"


def test_preemption_sets_the_flag_and_sends_sigterm_to_the_workload_but_sshd_stays(sim_machines):  # noqa: F811
    vm, = sim_machines.boot(sim_machines.machine("vm0", spot=True))
    flag = "curl -s -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/instance/preempted"
    assert sim_machines.ssh(vm, flag) == "FALSE"
    sim_machines.ssh(vm, "nohup bash -c 'trap \"echo term > /tmp/got-term; exit 0\" TERM; touch /tmp/trapped; "
                         "while :; do sleep 0.1; done' >/dev/null 2>&1 &")
    # a TERM that came before the trap was set would end the workload without a word
    wait_for(lambda: sim_machines.ssh(vm, "test -e /tmp/trapped && echo set || true"), what="the workload's trap set")
    sim_machines.backend.announce_preemption(vm.key)
    assert wait_for(lambda: sim_machines.ssh(vm, "cat /tmp/got-term 2>/dev/null || true"),
                    what="the workload's TERM trap ran") == "term\n"
    assert sim_machines.ssh(vm, flag) == "TRUE"


def test_a_preempted_machine_has_shut_down_once_its_programs_have_ended_not_before(sim_machines):  # noqa: F811
    """What lets the API stop a preempted VM before its grace period is over (compute_spot.py):
    a program that ignores the shutdown's SIGTERM holds it (on GCE, until G3 Mechanical Off)."""
    vm, = sim_machines.boot(sim_machines.machine("vm0", spot=True))
    sim_machines.ssh(vm, "nohup bash -c 'trap \"\" TERM; touch /tmp/stubborn; "
                         "while [ ! -e /tmp/go ]; do sleep 0.1; done' >/dev/null 2>&1 &")
    wait_for(lambda: sim_machines.ssh(vm, "test -e /tmp/stubborn && echo set || true"), what="the workload's trap set")
    sim_machines.backend.announce_preemption(vm.key)
    assert not sim_machines.backend.shut_down(vm.key)
    sim_machines.ssh(vm, "touch /tmp/go")
    assert wait_for(lambda: sim_machines.backend.shut_down(vm.key), what="the guest's shutdown over")


def test_machines_see_the_shared_uv_cache_but_neither_the_simulators_home_nor_a_writable_usr(sim_machines):  # noqa: F811
    from infra.providers.stack_home import cache_dir

    vm, = sim_machines.boot(sim_machines.machine("vm0"))
    seen = sim_machines.ssh(vm, f"ls -A {sim_machines.home} | wc -l; test -d {cache_dir()}/uv && echo cache; "
                                "mkdir -p ~/trainctl && touch ~/trainctl/x && echo workdir; "
                                "sudo touch /usr/local/bin/x 2>&1 || true")
    assert seen.splitlines()[:3] == ["0", "cache", "workdir"] and "Read-only file system" in seen
    assert not Path("/usr/local/bin/x").exists()


def test_machines_boot_from_a_checkout_their_own_tmp_hides(sim_machines, monkeypatch):  # noqa: F811
    # A checkout under /tmp (or /root) is covered by the machine's own /tmp (/root) at boot: the
    # agent must have been opened before.
    checkout = Path(tempfile.mkdtemp(prefix="trainctl-checkout-", dir="/tmp"))
    try:
        monkeypatch.setattr(image, "GUEST_AGENT", Path(shutil.copy(image.GUEST_AGENT, checkout)))
        vm, = sim_machines.boot(sim_machines.machine("vm0"))
        assert sim_machines.ssh(vm, f"hostname; ls {checkout} 2>&1 || true").splitlines()[0] == vm.name
        assert "can't open file" not in sim_machines.console(vm)
        fds = sim_machines.ssh(vm, "sudo ls -l /proc/$(pgrep -o -x sshd)/fd")
        assert "guest.py" not in fds  # sshd holds no descriptor of the agent's source
    finally:
        shutil.rmtree(checkout, ignore_errors=True)
