"""Plans are data: the exact per-node commands, inspected without running anything."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from bootstrap.plan import BootstrapSpec, plan as bootstrap_plan
from infra.providers.inventory import Inventory, Node
from trainctl.launchers.rendezvous_store import DRAIN_SECONDS, SERVER_SOURCE
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import JOINERS_TIMEOUT_SECONDS, node_command, plan as launch_plan, stop_command, torchrun_args

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"


def inventory(n: int = 3, accelerator: str = "cpu", **extra) -> Inventory:
    return Inventory(
        stack="s", provider="local", bucket_uri="gs://bkt",
        nodes=tuple(Node(name=f"node{i}", rank=i, internal_ip=f"10.0.0.{10 + i}",
                         ssh_host=f"10.0.0.{10 + i}", host_keys=(KEY,), accelerator=accelerator,
                         workdir=f"/w/node{i}", interface="eth0") for i in range(n)),
        ssh_private_key="/k/id", known_hosts="/k/known_hosts", **extra)


def test_torchrun_command_per_node_is_exact():
    inv = inventory(3)
    spec = LaunchSpec(run_id="r-1", command=("python", "-m", "trainers.digits_ddp", "--job-dir", "{job_dir}"),
                      nproc_per_node=2, max_restarts=3)
    for node in inv.nodes:
        assert torchrun_args(inv, node, spec) == [
            f"/w/node{node.rank}/venv/bin/torchrun", "--nnodes=3", "--nproc-per-node=2",
            "--rdzv-backend=c10d", "--rdzv-endpoint=10.0.0.10:29400", "--rdzv-id=r-1",
            "--rdzv-conf=is_host=false",
            f"--local-addr=10.0.0.{10 + node.rank}", "--max-restarts=3", "--monitor-interval=1",
            "--tee=3", "--module", "trainers.digits_ddp", "--job-dir", "gs://bkt/r-1"]


def test_after_a_recovery_the_agents_wait_for_the_nodes_still_being_bootstrapped():
    inv = inventory(3)
    spec = LaunchSpec(run_id="r-1", command=("python", "train.py"))
    later = launch_plan(inv, spec, attempt=1, joiners=True)
    for node in inv.nodes:
        assert f"--rdzv-conf=is_host=false,join_timeout={JOINERS_TIMEOUT_SECONDS}" in shlex.split(later[node.name])
        assert "join_timeout" not in launch_plan(inv, spec, attempt=1)[node.name]  # torch's default otherwise


def test_rank_0_runs_its_agent_under_the_rendezvous_store_and_the_others_only_torchrun():
    inv = inventory(3)
    spec = LaunchSpec(run_id="r-1", command=("python", "train.py"))
    commands = launch_plan(inv, spec)
    host = shlex.split(commands["node0"])
    assert host[host.index("exec") + 1:] == [
        "/w/node0/venv/bin/python", "-c", SERVER_SOURCE, "10.0.0.10", "29400", str(DRAIN_SECONDS),
        *torchrun_args(inv, inv.nodes[0], spec)]
    for other in ("node1", "node2"):
        words = shlex.split(commands[other])
        assert words[words.index("exec") + 1:] == torchrun_args(inv, inv.node(other), spec)


def test_every_torchrun_agent_gives_each_restart_of_its_workers_a_store_of_their_own():
    """Workers of an in-place restart must not read their predecessors' addresses from a store
    shared across restarts (rendezvous_store.AGENT_ENV)."""
    inv = inventory(3)
    commands = launch_plan(inv, LaunchSpec(run_id="r-1", command=("python", "train.py")))
    for node in inv.nodes:
        assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in shlex.split(commands[node.name])
    opted_out = launch_plan(inv, LaunchSpec(run_id="r-1", command=("python", "train.py"),
                                            env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0"}))
    words = shlex.split(opted_out["node1"])  # the job's own choice stands
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=0" in words and "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" not in words


def test_script_and_non_python_commands():
    inv = inventory(1)
    script = torchrun_args(inv, inv.nodes[0], LaunchSpec(run_id="r", command=("python", "train.py", "--lr", "1")))
    assert script[-3:] == ["train.py", "--lr", "1"] and "--module" not in script
    binary = torchrun_args(inv, inv.nodes[0], LaunchSpec(run_id="r", command=("./run.sh", "x")))
    assert binary[-3:] == ["--no-python", "./run.sh", "x"]


def test_node_command_environment_and_quoting():
    inv = inventory(2, node_env={"STORAGE_EMULATOR_HOST": "http://10.0.0.2:9023"})
    spec = LaunchSpec(run_id="r", command=("python", "t.py", "$(touch /pwned)", "a b; rm -rf /"),
                      env={"MY_VAR": "it's"})
    cmd = node_command(inv, inv.nodes[1], spec)
    words = shlex.split(cmd)
    # User arguments arrive as single words, never as shell syntax.
    assert "$(touch /pwned)" in words and "a b; rm -rf /" in words
    for expected in ("AIP_MODEL_DIR=gs://bkt/r/model", "AIP_CHECKPOINT_DIR=gs://bkt/r/checkpoints",
                     "GLOO_SOCKET_IFNAME=eth0", "TRAINCTL_RUN_ID=r", "MY_VAR=it's",
                     "STORAGE_EMULATOR_HOST=http://10.0.0.2:9023",
                     "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=[node1 r${rank}]:"):
        assert expected in words
    assert set(launch_plan(inv, spec)) == {"node0", "node1"}


def test_ranks_on_nodes_that_share_a_machines_cores_get_their_share_of_threads_unless_the_job_says(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    shared = inventory(2, on_controller=True)
    words = shlex.split(node_command(shared, shared.nodes[1], LaunchSpec(run_id="r", command=("python", "t.py"),
                                                                            nproc_per_node=2)))
    assert {"OMP_NUM_THREADS=2", "TF_NUM_INTRAOP_THREADS=2"} <= set(words)
    assert not [w for w in words if w.startswith("TF_NUM_INTEROP_THREADS=")]  # PS training hangs with one
    crowded = inventory(9, on_controller=True)  # never fewer than one thread
    assert "OMP_NUM_THREADS=1" in shlex.split(node_command(crowded, crowded.nodes[0],
                                                           LaunchSpec(run_id="r", command=("python", "t.py"))))
    mine = LaunchSpec(run_id="r", command=("python", "t.py"), env={"OMP_NUM_THREADS": "6"})
    assert "OMP_NUM_THREADS=6" in shlex.split(node_command(shared, shared.nodes[0], mine))
    own_cores = inventory(2)  # VMs: torch and TF size their pools from the VM's own cores
    assert not [w for w in shlex.split(node_command(own_cores, own_cores.nodes[0], mine)) if "THREADS=" in w
                and not w.startswith("OMP_NUM_THREADS=6")]


def test_stop_command_targets_only_the_run_marker():
    cmd = stop_command("r-7")
    assert "TRAINCTL_RUN_ID=r-7" in cmd and "kill -TERM" in cmd and "kill -KILL" in cmd


@pytest.fixture
def code(tmp_path: Path) -> Path:
    (tmp_path / "requirements.txt").write_text("numpy\n")
    return tmp_path


def steps_of(inv, spec):
    return {s.name: s for s in bootstrap_plan(inv, spec)[0].steps}


def test_an_environment_without_requirements_is_made_before_the_sync(code):
    steps = steps_of(inventory(1), BootstrapSpec(code_dir=code, setup=("true",)))
    assert list(steps) == ["ready", "drivers", "env", "sync", "setup"]


def test_bootstrap_plan_for_a_cpu_node_skips_drivers(code):
    steps = steps_of(inventory(1), BootstrapSpec(code_dir=code, requirements="requirements.txt"))
    assert list(steps) == ["ready", "drivers", "sync", "env"]  # env reads the synced requirements
    assert steps["drivers"].note == "not needed"
    assert "nproc" in steps["ready"].command
    rsync = steps["sync"].command
    assert rsync[0] == "rsync" and "--delete" in rsync and "--filter=:- .gitignore" in rsync
    ssh = rsync[rsync.index("-e") + 1]
    assert "StrictHostKeyChecking=yes" in ssh and "UserKnownHostsFile=/k/known_hosts" in ssh
    assert "uv pip install" in steps["env"].command.replace('"$UV"', "uv")
    assert steps["sync"].fingerprint and steps["env"].fingerprint and steps["ready"].fingerprint is None
    # the run-time alternative is in the plan too, as the exact command the node runs
    from bootstrap.plan import delta_sync_command

    assert steps["sync"].instead.endswith(delta_sync_command(inventory(1).nodes[0], ["<removed files>"],
                                                             steps["sync"].fingerprint))
    assert "tar -xzf - --no-same-owner" in steps["sync"].instead


def test_bootstrap_plan_for_a_gpu_node_installs_the_driver_only_when_missing(code):
    steps = steps_of(inventory(1, "gpu:8xnvidia-tesla-a100"), BootstrapSpec(code_dir=code))
    drivers = steps["drivers"].command
    assert drivers.startswith("if nvidia-smi -L") and "cuda_installer.pyz install_driver" in drivers
    assert "nvidia-smi -L" in steps["ready"].command


def test_bootstrap_plan_for_a_tpu_worker_probes_the_tpu_device(code):
    steps = steps_of(inventory(4, "tpu:v5litepod-16"), BootstrapSpec(code_dir=code))
    assert "/dev/accel*" in steps["ready"].command and "/dev/vfio" in steps["ready"].command
    assert steps["drivers"].note == "not needed"


def test_env_fingerprint_changes_with_requirements_and_setup_gets_rank(code):
    inv = inventory(2)
    spec = BootstrapSpec(code_dir=code, requirements="requirements.txt", setup=("echo $TRAINCTL_NODE_RANK",))
    first = steps_of(inv, spec)
    (code / "requirements.txt").write_text("numpy\nscipy\n")
    second = steps_of(inv, spec)
    assert first["env"].fingerprint != second["env"].fingerprint
    assert first["sync"].fingerprint != second["sync"].fingerprint  # the file changed size
    setup = bootstrap_plan(inv, spec)[1].steps[-1].command
    assert "TRAINCTL_NODE_RANK=1" in setup and "TRAINCTL_NODE_IPS=10.0.0.10,10.0.0.11" in setup


def test_unknown_force_step_is_refused(code):
    with pytest.raises(ValueError, match="unknown step"):
        BootstrapSpec(code_dir=code, force=("everything",))


def test_tensorflow_nodes_get_tf_config_as_ai_platform_sets_it():
    import json

    inv = inventory(3)
    spec = LaunchSpec(run_id="tf", framework="tensorflow", command=("python", "-m", "trainers.digits_keras"))
    configs = []
    for node in inv.nodes:
        words = shlex.split(node_command(inv, node, spec))
        tf_config = next(w for w in words if w.startswith("TF_CONFIG="))
        configs.append(json.loads(tf_config.split("=", 1)[1]))
        assert words[-3:] == [f"/w/node{node.rank}/venv/bin/python", "-m", "trainers.digits_keras"]
        assert not any("torchrun" in w for w in words)
    cluster = {"chief": ["10.0.0.10:2222"], "worker": ["10.0.0.11:2222", "10.0.0.12:2222"]}
    assert [c["cluster"] for c in configs] == [cluster] * 3
    assert [c["task"] for c in configs] == [{"type": "chief", "index": 0}, {"type": "worker", "index": 0},
                                            {"type": "worker", "index": 1}]


def test_launch_plan_names_the_rendezvous_server_instead_of_printing_its_source():
    """Issue 48: `launch --plan` printed ~150 lines of the server's source inside node0's command."""
    from infra.spec.stack_config import load_stack
    from trainctl.launchers.protocol import LaunchPlan
    from trainctl.launchers.rendezvous_store import SERVER_SHOWN

    inv = inventory(3)
    spec = LaunchSpec(run_id="r-1", command=("python", "train.py"))
    commands = launch_plan(inv, spec)
    shown = LaunchPlan(load_stack("local"), inv, spec, commands=commands).render()
    assert SERVER_SOURCE not in shown and shlex.quote(SERVER_SOURCE) not in shown
    node0 = shown.split("# node1")[0]
    assert SERVER_SHOWN in node0 and f"{SERVER_SHOWN} 10.0.0.10 29400" in node0
    assert len(shown.splitlines()) == 6  # each node: its name and one command line
    assert shlex.quote(SERVER_SOURCE) in commands["node0"]  # what runs is the whole source
    objects = LaunchPlan(load_stack("local"), inv, spec, objects=[{"spec": {"command": [
        "bash", "-c", f"exec python -c {shlex.quote(SERVER_SOURCE)} 127.0.0.1"]}}]).render()
    assert SERVER_SOURCE not in objects and SERVER_SHOWN in objects
