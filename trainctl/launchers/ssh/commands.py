"""Each node's command line, as data, before anything runs.

torch:       torchrun on every node, c10d rendezvous on rank 0's internal address, rdzv_id = run
             id, its store in a process of its own that runs rank 0's agent and outlives every
             agent (rendezvous_store.py); the program sees torchrun's standard variables (RANK,
             LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
tensorflow:  the program on every node with TF_CONFIG as AI Platform sets it (rank 0 is the
             chief, the others workers 0..n-2), so MultiWorkerMirroredStrategy works unchanged.
jax:         the program on every node of the group, `jax.distributed.initialize()` given the
             coordinator on rank 0, the process count and id (jax_env.py), GPU, CPU and TPU VMs alike.
TPU VMs:     PyTorch/XLA runs the same command on every worker (PJRT_DEVICE=TPU). TensorFlow
             drives a single-host TPU in-process (TPU_NAME=local); on a multi-host slice only
             worker 0 runs the program, and TPUClusterResolver reaches the TF servers that the
             `-pod` runtime starts on every worker by the slice's name (TPU_NAME), as Google's
             TPU pod recipes run it. A multislice stack's workers (tpu.slices) also get
             MEGASCALE_* (trainctl/launchers/megascale.py).
Every program also gets the Vertex AI job-dir variables (AIP_MODEL_DIR, ...).
With an image, each node runs the same command line inside it (bootstrap/containers.py), the
environment passed by name, the node's network as is.
"""

from __future__ import annotations

import json
import shlex

from bootstrap import containers
from bootstrap.data_inputs import DATA_DIR_ENV, data_dir
from bootstrap.plan import node_paths
from bootstrap.remote_stop import stop_marked
from bootstrap.ssh import join, shell_env
from infra.errors import ConfigError
from infra.providers.inventory import Inventory, Node
from infra.spec.cluster import JAX_HAS_NO_PS, TORCH_HAS_NO_PS
from trainctl.launchers import rendezvous_store, torchrun_agents
from trainctl.launchers.jax_env import booted, jax_env
from trainctl.launchers.megascale import megascale_env
from trainctl.launchers.nccl_env import nccl_env, nccl_preamble
from trainctl.launchers.cluster_env import (cluster_spec, command_for, expand, job_env, members, task_of,
                                            tf_config, thread_share, torch_group, torchrun_target,
                                            tpu_type)
from trainctl.launchers.shared_dir import SHARED_DIR_ENV, node_folder, preamble
from trainctl.launchers.spec import LaunchSpec


STOP_GRACE_SECONDS = 5


# How long torchrun's agents wait in the rendezvous for nodes that join late: a recreated node's
# reclaim, capacity back-off and bootstrap (a GPU driver's install and its reboot among it) can
# outlast torch's default of 600 s. Only a backstop: the launcher stops the waiting agents itself
# when the recreation fails or the run ends (its TTL, an interrupt).
JOINERS_TIMEOUT_SECONDS = 24 * 3600


def program_tool(node: Node, spec: LaunchSpec, tool: str) -> str:
    """torchrun or python of the program's environment: the node's uv environment, or whatever
    the image's PATH finds (its own environment first, in images trainctl builds)."""
    return tool if spec.image else f"{node_paths(node)['venv']}/bin/{tool}"


def torchrun_args(inventory: Inventory, node: Node, spec: LaunchSpec, attempt: int = 0,
                  joiners: bool = False) -> list[str]:
    group = torch_group(inventory)
    rank0 = group[0]
    # No agent hosts the store: it runs beside rank 0's agent and outlives them all
    # (rendezvous_store.py). Said outright, too, because all nodes may share a hostname (they do
    # on the local stack), which torchrun would take for the store's.
    rdzv_conf = rendezvous_store.RDZV_CONF
    if joiners:
        rdzv_conf += f",join_timeout={JOINERS_TIMEOUT_SECONDS}"
    target = torchrun_target(expand(command_for(spec, inventory, node), inventory, spec.run_id,
                                    shared_folder(inventory, node, spec)))
    return [
        program_tool(node, spec, "torchrun"),
        f"--nnodes={len(group)}",
        f"--nproc-per-node={spec.nproc_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={rank0.internal_ip}:{inventory.rendezvous_port}",
        # Each job attempt meets in a fresh rendezvous; the run id stays the same.
        f"--rdzv-id={spec.run_id}" + (f"-a{attempt}" if attempt else ""),
        f"--rdzv-conf={rdzv_conf}",
        f"--local-addr={node.internal_ip}",
        f"--max-restarts={spec.max_restarts}",
        "--monitor-interval=1",
        "--tee=3",
        *target,
    ]


def uses_torchrun(node: Node, spec: LaunchSpec, inventory: Inventory) -> bool:
    return (spec.framework == "torch" and node.accelerator.kind != "tpu"
            and task_of(inventory, node)[0] in ("chief", "worker"))


def program_nodes(inventory: Inventory, spec: LaunchSpec) -> list[Node]:
    """The nodes that run the user's program: all, except TensorFlow on a multi-host TPU slice,
    where a copy of the program on the other workers would fight their TF servers for the chips."""
    tpu = tpu_type(inventory.rank0)
    if spec.framework == "tensorflow" and tpu is not None and tpu.multi_host:
        return [inventory.rank0]
    return list(inventory.nodes)


def tpu_env(node: Node, spec: LaunchSpec) -> dict[str, str]:
    tpu = tpu_type(node)
    assert tpu is not None
    if spec.framework == "torch":
        return {"PJRT_DEVICE": "TPU"}
    if spec.framework == "jax":  # JAX loads libtpu and finds the chips itself
        return {}
    if not tpu.multi_host:
        return {"TPU_NAME": "local", "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true",
                "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": "/lib/libtpu.so"}
    if not node.tpu_name:
        raise ConfigError(f"{node.name} is a worker of a multi-host {tpu.name} slice but the inventory "
                          "does not name the slice (tpu_name); run `trainctl up` again")
    # The pod runtime's TF server on this worker owns libtpu; the program only connects to it.
    return {"TPU_NAME": node.tpu_name, "TPU_LOAD_LIBRARY": "0"}


def direct_args(inventory: Inventory, node: Node, spec: LaunchSpec) -> list[str]:
    """The user's command as is, with `python` meaning the node environment's interpreter."""
    user = expand(command_for(spec, inventory, node), inventory, spec.run_id, shared_folder(inventory, node, spec))
    if spec.framework == "jax":
        return booted(program_tool(node, spec, "python"), user)
    if user[0] in ("python", "python3"):
        user = [program_tool(node, spec, "python"), *user[1:]]
    return user


HYPERTUNE_FILE_ENV = "CLOUD_ML_HP_METRIC_FILE"


def hypertune_file(node: Node, run_id: str) -> str:
    return f"{node_run_dir(node, run_id)}/hypertune/output.metrics"


def node_run_dir(node: Node, run_id: str) -> str:
    return f"{node_paths(node)['state']}/runs/{run_id}"


def job_workdir(node: Node, run_id: str, image: str | None) -> str:
    """Where the program runs on the node: the code folder bootstrap synced, or in an image
    (which holds the code) the run's own folder on the node."""
    return node_run_dir(node, run_id) if image else node_paths(node)["code"]


def shared_folder(inventory: Inventory, node: Node, spec: LaunchSpec) -> str | None:
    return node_folder(inventory, node, spec.run_id) if spec.shared_dir else None


def node_command(inventory: Inventory, node: Node, spec: LaunchSpec, attempt: int = 0,
                 joiners: bool = False) -> str:
    p = node_paths(node)
    run_dir = node_run_dir(node, spec.run_id)
    env = {
        **inventory.node_env,
        **thread_share(inventory, spec, len(inventory.nodes)),
        **job_env(inventory, spec.run_id),
        **nccl_env(node),
        **spec.env,
        "PYTHONUNBUFFERED": "1",
        # Marks every process of this run on the node, whatever session torchrun gives it,
        # so `stop` finds workers that outlived their agent.
        "TRAINCTL_RUN_ID": spec.run_id,
        "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": f"[{node.name} r${{rank}}]:",
        # where an unchanged cloudml-hypertune writes its reports (default /tmp/hypertune/...):
        # per run, on the node, for the sweep to read from the chief
        HYPERTUNE_FILE_ENV: hypertune_file(node, spec.run_id),
        "PATH": f"{p['venv']}/bin:/usr/local/bin:/usr/bin:/bin",
        DATA_DIR_ENV: data_dir(node),  # where the experiment's data: inputs were staged
    }
    if spec.shared_dir:
        env[SHARED_DIR_ENV] = node_folder(inventory, node, spec.run_id)
    # A multislice worker's slice is the inventory's, whatever runs the program (on a simulated
    # TPU stack, torchrun on the CPU that stands in for the chips).
    env.update(megascale_env(inventory, node))
    if node.interface:
        # gloo otherwise binds to the address the hostname resolves to (loopback here).
        env["GLOO_SOCKET_IFNAME"] = node.interface
    if tpu_type(node) is None:
        env["CLUSTER_SPEC"] = json.dumps(cluster_spec(inventory, node), separators=(",", ":"))
    if uses_torchrun(node, spec, inventory):
        env["LOGLEVEL"] = torchrun_agents.agent_log_level(spec.env)  # its groups' starts and ends
        env.update(rendezvous_store.agent_env(spec.env))
        argv = torchrun_args(inventory, node, spec, attempt, joiners)
        if node.name == torch_group(inventory)[0].name:
            argv = rendezvous_store.hosting(program_tool(node, spec, "python"), node.internal_ip,
                                            inventory.rendezvous_port, argv)
    else:
        del env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"]
        argv = direct_args(inventory, node, spec)
        if tpu_type(node) is not None:
            env.update(tpu_env(node, spec))
        elif spec.framework == "tensorflow":
            env["TF_CONFIG"] = json.dumps(tf_config(inventory, node), separators=(",", ":"))
        if spec.framework == "jax":
            env.update(jax_env(inventory, node))
    if spec.image:
        inside = sorted(k for k in env if k != "PATH")  # the image's own PATH leads to its venv
        env.update(containers.container_env(node))
        argv = containers.run_argv(node, spec.image, inside, [run_dir], argv)
    workdir = job_workdir(node, spec.run_id, spec.image)
    shared = preamble(inventory, node, spec.run_id, spec.shared_dir)
    return (f"mkdir -p {shlex.quote(run_dir)} && cd {shlex.quote(workdir)} && {shared}{nccl_preamble(node)}{shell_env(env)}"
            f"echo $$ > {shlex.quote(run_dir + '/launcher.pid')}; exec {join(argv)}")


def stop_command(run_id: str, grace: float = STOP_GRACE_SECONDS) -> str:
    """Kill every process on the node that carries the run's marker: TERM, up to `grace`
    seconds for them to leave (a trainer saving its checkpoint), then KILL. A torchrun agent
    (`python .../torchrun`) is not waited for once the rest are gone: it has nothing to save,
    and its own shutdown took 0.5-0.9 s here, which the survivors of a preemption waited on
    before they could start again."""
    return stop_marked(f"TRAINCTL_RUN_ID={run_id}", grace, unwaited="*'/torchrun '*")


def plan(inventory: Inventory, spec: LaunchSpec, attempt: int = 0, joiners: bool = False) -> dict[str, str]:
    """Each node's command. `joiners`: some nodes start later than the others (recreated ones,
    still being bootstrapped), and the others' agents wait for them that much longer."""
    if spec.framework in ("torch", "jax") and members(inventory, "ps"):
        raise ConfigError(TORCH_HAS_NO_PS if spec.framework == "torch" else JAX_HAS_NO_PS)
    return {node.name: node_command(inventory, node, spec, attempt, joiners)
            for node in program_nodes(inventory, spec)}


def servers(inventory: Inventory) -> list[Node]:
    """Parameter-server training: ps and worker replicas serve until the job is over, which
    the chief decides (as on Vertex AI, the primary replica's end is the job's)."""
    if not members(inventory, "ps"):
        return []
    return members(inventory, "ps") + members(inventory, "worker")
