"""The local controller's machine on its own (infra/providers/local/controller_node.py): reached
only with the host key it was made with, a machine of its own until a command asks for the
target's API through `on_target`, and gone without a trace when removed."""

from __future__ import annotations

import subprocess
import time

import pytest

from conftest import leftovers
from namespace_nodes import keys

pytestmark = pytest.mark.e2e

NAME = "ctl-probe"


def run_on(inventory, command: str) -> tuple[int, str]:
    from bootstrap.ssh import open_connection

    with open_connection(inventory, inventory.rank0, deadline=time.monotonic() + 30) as conn:
        done = conn.run(command, hide=True, warn=True, in_stream=False)
        return done.exited, done.stdout.strip()


def test_the_controller_is_its_own_machine_reached_by_its_pinned_key_and_leaves_nothing(tmp_path, trainctl_home):
    from infra.providers.local import controller_node as ctl

    inventory = ctl.start(NAME, print)
    try:
        assert ctl.exists(NAME) and ctl.names() == [NAME]
        assert run_on(inventory, "hostname") == (0, "controller")
        assert run_on(inventory, "cat /proc/1/comm") == (0, "sshd")  # PID 1 of its own PID namespace
        own_ns = f"/run/netns/tc-{NAME}-n0"
        assert run_on(inventory, f"test -e {own_ns}")[0] != 0  # its /run is its own
        assert run_on(inventory, ctl.on_target(f"test -e {own_ns} && cat /proc/1/comm", "/"))[1] == "sshd"
        # a folder in this machine's /tmp (a checkout, a run folder) is the target's, not the
        # controller's private /tmp: a clean clone under /tmp could not start its controller
        (tmp_path / "here").write_text("this machine's /tmp")
        assert run_on(inventory, ctl.on_target("cat here", str(tmp_path))) == (0, "this machine's /tmp")
        impostor = keys.write_ed25519_keypair(tmp_path / "other_key", "impostor")
        wrong = inventory.model_copy(update={
            "nodes": (inventory.rank0.model_copy(update={"host_keys": (impostor,)}),),
            "known_hosts": str(tmp_path / "known_hosts")})
        (tmp_path / "known_hosts").write_text("\n".join(wrong.known_hosts_lines()) + "\n")
        with pytest.raises(Exception, match="(?i)host key|not found in known_hosts|BadHostKey"):
            run_on(wrong, "true")
    finally:
        assert ctl.remove(NAME, print)
    assert leftovers(NAME) == [] and not ctl.controller_dir(NAME).exists() and not ctl.exists(NAME)
    ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"/controllers/{NAME}/" not in ps
    assert ctl.remove(NAME, print) is False  # safe to repeat
