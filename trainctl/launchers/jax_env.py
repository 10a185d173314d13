"""`framework: jax` on SSH nodes (local, GCP VMs, TPU VMs): every node of the job's process group
(the chief and the workers, in rank order; a TPU stack's workers of every slice) runs the
program, and `jax.distributed.initialize()` learns the group from trainctl:

- JAX_COORDINATOR_ADDRESS=<rank 0's internal address>:JAX_COORDINATOR_PORT, which JAX reads itself
  (jax/_src/distributed.py, State.initialize: `coordinator_address or
  os.environ.get('JAX_COORDINATOR_ADDRESS')`);
- JAX_COORDINATOR_BIND_ADDRESS on rank 0 only: its coordinator service listens on the cluster
  address alone, not JAX's default `[::]:<port>` (every interface), also read by JAX itself;
- the process count and this process's id, and the initialization timeout, which JAX takes only
  as arguments or from environments it detects (SLURM, Open MPI, Kubernetes, Cloud TPU metadata;
  jax/_src/clusters/): the program runs under jax_boot.py, which gives
  `jax.distributed.initialize` these as defaults.
On a multislice TPU stack the MEGASCALE_* variables join the slices as for PyTorch/XLA
(megascale.py); the process ids run over the slices in rank order, as JAX's own Cloud TPU cluster
numbers them (slice id * workers per slice + worker id, jax/_src/clusters/cloud_tpu_cluster.py).
"""

from __future__ import annotations

from pathlib import Path

from infra.providers.inventory import Inventory, Node
from trainctl.launchers import jax_boot
from trainctl.launchers.cluster_env import torch_group

# The coordinator's port: JAX's own default on Cloud TPU since jax 0.8.1 (jax-ml/jax#35905,
# jax/_src/clusters/cloud_tpu_cluster.py `coordinator_port = '8482'`; 0.8.0 and before: 8476).
# trainctl always names its port in JAX_COORDINATOR_ADDRESS, so the JAX version in use does not
# change it. The stacks' firewalls admit it between the cluster's nodes only (their internal rule).
JAX_COORDINATOR_PORT = 8482

# How long jax.distributed.initialize waits for the whole group (JAX's default: 300 s). The nodes
# start together, but a recreated node's reclaim and bootstrap (a GPU driver's install and its
# reboot among it) outlast minutes; only a backstop, since the launcher stops the waiting
# processes itself when the run ends or a node's recreation fails.
INITIALIZATION_TIMEOUT_SECONDS = 3600

BOOT_SOURCE = Path(jax_boot.__file__).read_text()
# How a plan shows the wrapper (`python -c SOURCE` in every node's command): by name.
BOOT_SHOWN = (f"<jax boot: {len(BOOT_SOURCE.splitlines())} lines of trainctl/launchers/jax_boot.py>")


def jax_group(inventory: Inventory) -> list[Node]:
    """The nodes of the JAX process group, process id = place in this list."""
    return torch_group(inventory)


def jax_env(inventory: Inventory, node: Node) -> dict[str, str]:
    """The node's JAX variables; none on a node outside the group (an evaluator)."""
    group = jax_group(inventory)
    ids = {n.name: i for i, n in enumerate(group)}
    if node.name not in ids:
        return {}
    return process_env(group[0].internal_ip, len(group), ids[node.name])


def process_env(coordinator: str, count: int, process_id: int) -> dict[str, str]:
    """What process `process_id` of `count` is told, the coordinator at address `coordinator`."""
    env = {"JAX_COORDINATOR_ADDRESS": f"{coordinator}:{JAX_COORDINATOR_PORT}",
           jax_boot.NUM_PROCESSES: str(count), jax_boot.PROCESS_ID: str(process_id),
           jax_boot.INIT_TIMEOUT: str(INITIALIZATION_TIMEOUT_SECONDS)}
    if process_id == 0:
        env["JAX_COORDINATOR_BIND_ADDRESS"] = f"{coordinator}:{JAX_COORDINATOR_PORT}"
    return env


# How `run --plan` names rank 0's address before the stack exists.
PLANNED_COORDINATOR = "<rank-0-internal-ip>"


def planned(count: int) -> list[dict[str, str]]:
    """Each process's variables as `run --plan` shows them, before the nodes have addresses."""
    return [process_env(PLANNED_COORDINATOR, count, i) for i in range(count)]


def booted(python: str, user: list[str]) -> list[str]:
    """The program under jax_boot.py where it is a Python script or module (`python x.py`,
    `python -m pkg`); anything else as is (it reads the TRAINCTL_JAX_* variables itself)."""
    if user[0] not in ("python", "python3") or len(user) < 2:
        return user
    if user[1].startswith("-") and not (user[1] == "-m" and len(user) > 2):
        return user
    return [python, "-c", BOOT_SOURCE, *user[1:]]
