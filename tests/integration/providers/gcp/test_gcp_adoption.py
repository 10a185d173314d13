"""A stack made by `pulumi up` alone (no trainctl), in a simulated project, then used by trainctl:
adopted on first use only where trainctl holds the private half of the key the nodes admit, and
brought down like one trainctl made."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bootstrap.plan import BootstrapSpec, plan as bootstrap_plan
from infra.providers import realizers
from namespace_nodes import keys
from infra.errors import ConfigError
from infra.providers.stack_home import recorded_provider
from tests.fakes.sim_stacks import Project, gcp, make_gcp, nat_ip, simulated_gcp  # noqa: F401 (fixtures)
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import plan as launch_plan


def pulumi_up_by_hand(project: Project, stack: str) -> None:
    """What a user does in the repository: `pulumi stack init` + `pulumi up`, no trainctl involved."""
    for argv in (["stack", "init", stack], ["up", "--yes", "--skip-preview", "--stack", stack]):
        done = subprocess.run(["pulumi", *argv], cwd=project.root, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_stack_made_by_pulumi_up_is_adopted_with_the_users_key_then_brought_down(
        gcp: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # the program puts ~/.ssh/id_ed25519.pub on the nodes
    private = tmp_path / "user" / ".ssh" / "id_ed25519"
    keys.write_ed25519_keypair(private, "user@laptop")
    spec = gcp.stack("gpu-t4x2")
    node = f"{spec.name}-node-0"
    pulumi_up_by_hand(gcp, spec.name)
    made = gcp.operations()

    # without the private half of the key its nodes admit, trainctl cannot reach the stack
    private.rename(private.with_name("elsewhere"))
    with pytest.raises(ConfigError, match=r"admits the SSH key ssh-ed25519 …\S+, whose private half is not in"):
        realizers.inventory(spec.name)
    assert recorded_provider(spec.name) is None  # nothing adopted: no state written
    private.with_name("elsewhere").rename(private)

    inventory = realizers.inventory(spec.name)  # bootstrap, launch, status all start here
    assert recorded_provider(spec.name) == "gcp" and inventory.ssh_private_key == str(private)
    vm = gcp.instance(node)
    assert vm is not None
    address = nat_ip(vm)
    assert [(n.name, n.ssh_host, n.host_keys) for n in inventory.nodes] == [(node, address, (gcp.host_key(node),))]
    assert Path(inventory.known_hosts).read_text().splitlines() == [f"{address} {gcp.host_key(node)}"]
    assert gcp.operations() == made  # adopting changes nothing in the project
    # the layers above take the adopted inventory as they take one from `trainctl up`
    nodes = bootstrap_plan(inventory, BootstrapSpec(code_dir=str(gcp.root), setup=("true",)))
    assert len(nodes) == 1 and all(n.steps for n in nodes)
    commands = launch_plan(inventory, LaunchSpec(run_id="r1", command=("python", "t.py")))
    assert len(commands) == 1 and all("torchrun" in c for c in commands.values())

    assert realizers.for_stack(spec.name).down(spec.name, force=False, progress=gcp.progress)
    gcp.next_command()
    assert gcp.instances() == {} and gcp.names("networks") == set()
    assert (gcp.root / "stacks" / f"Pulumi.{spec.name}.yaml").is_file() and recorded_provider(spec.name) is None
