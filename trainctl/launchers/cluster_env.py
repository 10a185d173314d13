"""What every node (or pod) learns about the cluster it runs in, as AI Platform / Vertex AI tell
it: its task (chief, worker, ps, evaluator and its index), TF_CONFIG, CLUSTER_SPEC, the job dir
and its Vertex variables. Shared by the SSH and the GKE launchers."""

from __future__ import annotations

import os

from infra.providers.inventory import Inventory, Node
from infra.spec import catalog
from infra.spec.accelerator import Tpu
from infra.spec.cluster import POOL_ORDER, Role
from trainctl.launchers.spec import LaunchSpec


def job_dir(inventory: Inventory, run_id: str) -> str:
    return f"{inventory.bucket_uri.rstrip('/')}/{run_id}"


def job_env(inventory: Inventory, run_id: str) -> dict[str, str]:
    """The job-dir convention of Vertex AI custom training."""
    base = job_dir(inventory, run_id)
    return {"AIP_MODEL_DIR": f"{base}/model", "AIP_CHECKPOINT_DIR": f"{base}/checkpoints",
            "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs"}


def thread_share(inventory: Inventory, spec: LaunchSpec, nodes: int) -> dict[str, str]:
    """Each program process's share of the cores when the nodes share one machine's. PyTorch and
    TensorFlow otherwise start a compute thread per core in every rank, and the ranks' threads
    spin-wait for cores the other ranks hold: a 2-node digits run took 2.2x the CPU on 2 cores
    (bench/shared_cores.py). torchrun divides a node's cores among its processes the same way (OMP_NUM_THREADS=1
    for several per node); the job's own env still overrides this."""
    if not inventory.on_controller:
        return {}
    share = str(max(1, len(os.sched_getaffinity(0)) // (max(1, nodes) * spec.nproc_per_node)))
    # Only the compute pools: TensorFlow's inter-op threads wait on RPCs and each other, and
    # parameter-server training with one of them hangs.
    return {"OMP_NUM_THREADS": share, "TF_NUM_INTRAOP_THREADS": share}


def expand(command: tuple[str, ...], inventory: Inventory, run_id: str, shared: str | None = None) -> list[str]:
    """`{job_dir}`, `{run_id}` and (where the run has one) `{shared_dir}`, this node's path of it."""
    values = {"job_dir": job_dir(inventory, run_id), "run_id": run_id}
    expanded = [arg.replace("{job_dir}", values["job_dir"]).replace("{run_id}", run_id) for arg in command]
    return expanded if shared is None else [arg.replace("{shared_dir}", shared) for arg in expanded]


def torchrun_target(user: list[str]) -> list[str]:
    """The user's command as torchrun's trailing arguments: `python x.py` → `x.py`,
    `python -m pkg` → `--module pkg`, anything else → `--no-python cmd`."""
    if user[0] in ("python", "python3"):
        rest = user[1:]
        return ["--module", *rest[1:]] if rest[:1] == ["-m"] else rest
    return ["--no-python", *user]


def tasks(inventory: Inventory) -> dict[str, tuple[Role, int]]:
    """Every node's task as AI Platform / Vertex AI name it: (chief|worker|ps|evaluator, index
    within its role), in one pass over the nodes in rank order. Inventories without pools: the
    first node is the chief, the rest workers."""
    ordered = sorted(inventory.nodes, key=lambda n: n.rank)
    pooled = any(n.task is not None for n in ordered)
    seen: dict[Role, int] = {}
    out: dict[str, tuple[Role, int]] = {}
    for i, node in enumerate(ordered):
        role: Role = (node.task or "worker") if pooled else ("chief" if i == 0 else "worker")
        out[node.name] = (role, seen.get(role, 0))
        seen[role] = seen.get(role, 0) + 1
    return out


def task_of(inventory: Inventory, node: Node) -> tuple[Role, int]:
    return tasks(inventory)[node.name]


def members(inventory: Inventory, role: str) -> list[Node]:
    """The role's nodes in rank order."""
    of = tasks(inventory)
    return [n for n in sorted(inventory.nodes, key=lambda n: n.rank) if of[n.name][0] == role]


def command_for(spec: LaunchSpec, inventory: Inventory, node: Node) -> tuple[str, ...]:
    return spec.role_commands.get(task_of(inventory, node)[0], spec.command)


def torch_group(inventory: Inventory) -> list[Node]:
    """The nodes torchrun joins: the chief and the workers (Vertex's pools 0 and 1)."""
    return members(inventory, "chief") + members(inventory, "worker")


TF_PORT = 2222


def tf_config(inventory: Inventory, node: Node) -> dict:
    """TF_CONFIG exactly as AI Platform sets it: chief, workers and parameter servers make up
    the cluster; an evaluator is not part of it, only its own task."""
    cluster = {role: [f"{n.internal_ip}:{TF_PORT}" for n in members(inventory, role)]
               for role in ("chief", "worker", "ps")}
    role, index = task_of(inventory, node)
    return {"cluster": {k: v for k, v in cluster.items() if v}, "task": {"type": role, "index": index},
            "environment": "cloud"}


def cluster_spec(inventory: Inventory, node: Node) -> dict:
    """CLUSTER_SPEC as Vertex AI sets it: every pool, the evaluator's too, by pool number."""
    pools = {f"workerpool{i}": [f"{n.internal_ip}:{TF_PORT}" for n in members(inventory, role)]
             for i, role in enumerate(POOL_ORDER)}
    role, index = task_of(inventory, node)
    return {"cluster": {k: v for k, v in pools.items() if v}, "environment": "cloud",
            "task": {"type": f"workerpool{POOL_ORDER.index(role)}", "index": index}}


def tpu_type(node: Node) -> catalog.TpuType | None:
    return node.accelerator.spec if isinstance(node.accelerator, Tpu) else None
