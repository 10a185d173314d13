"""The environment that joins the slices of a multislice TPU stack (tpu.slices > 1): libtpu's
MEGASCALE_* variables, read by JAX and PyTorch/XLA on every worker. The values are what Ray's TPU
support and Google's multislice recipes give each worker: the number of slices, the worker's own
slice, and a coordinator on slice 0's worker 0 at MEGASCALE_PORT (8081, Ray's default).
One source for both kinds of stack: TPU VMs name the coordinator by its address, GKE by its pod's
name under the run's headless Service; GKE's pods also get their slice's TPU_WORKER_ID and
TPU_WORKER_HOSTNAMES, which a TPU VM's runtime reads from its own metadata."""

from __future__ import annotations

from infra.errors import ConfigError
from infra.providers.inventory import Inventory, Node

MEGASCALE_PORT = 8081


def slices(inventory: Inventory) -> int:
    """How many TPU slices the inventory's workers form (1 where it names none)."""
    return len({n.tpu_slice for n in inventory.nodes if n.tpu_slice is not None}) or 1


def megascale_values(num_slices: int, slice_id: int, coordinator_host: str) -> dict[str, str]:
    """The MEGASCALE_* variables of a worker of slice `slice_id`; none on a single slice."""
    if num_slices == 1:
        return {}
    return {"MEGASCALE_COORDINATOR_ADDRESS": f"{coordinator_host}:{MEGASCALE_PORT}",
            "MEGASCALE_NUM_SLICES": str(num_slices), "MEGASCALE_SLICE_ID": str(slice_id),
            "MEGASCALE_PORT": str(MEGASCALE_PORT)}


def tpu_worker_hostnames(hostnames: list[str]) -> dict[str, str]:
    """TPU_WORKER_HOSTNAMES: every host of the worker's own slice, in worker order (its
    TPU_WORKER_ID is its place in that list)."""
    return {"TPU_WORKER_HOSTNAMES": ",".join(hostnames)}


def megascale_env(inventory: Inventory, node: Node) -> dict[str, str]:
    """The node's MEGASCALE_* variables; none on a single slice."""
    count = slices(inventory)
    if count == 1:
        return {}
    if node.tpu_slice is None:
        raise ConfigError(f"{node.name} is a worker of a {count}-slice TPU stack but the inventory does not "
                          "say which slice (tpu_slice); run `trainctl up` again")
    coordinator = min((n for n in inventory.nodes if n.tpu_slice == 0), key=lambda n: n.rank)
    return megascale_values(count, node.tpu_slice, coordinator.internal_ip)
