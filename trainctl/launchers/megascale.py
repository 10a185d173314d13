"""The environment that joins the slices of a multislice TPU stack (tpu.slices > 1): libtpu's
MEGASCALE_* variables, read by JAX and PyTorch/XLA on every worker. The values are what Ray's TPU
support and Google's multislice recipes give each worker: the number of slices, the worker's own
slice, and a coordinator on slice 0's worker 0 at MEGASCALE_PORT (8081, Ray's default)."""

from __future__ import annotations

from infra.errors import ConfigError
from infra.providers.inventory import Inventory, Node

MEGASCALE_PORT = 8081


def slices(inventory: Inventory) -> int:
    """How many TPU slices the inventory's workers form (1 where it names none)."""
    return len({n.tpu_slice for n in inventory.nodes if n.tpu_slice is not None}) or 1


def megascale_env(inventory: Inventory, node: Node) -> dict[str, str]:
    """The node's MEGASCALE_* variables; none on a single slice."""
    count = slices(inventory)
    if count == 1:
        return {}
    if node.tpu_slice is None:
        raise ConfigError(f"{node.name} is a worker of a {count}-slice TPU stack but the inventory does not "
                          "say which slice (tpu_slice); run `trainctl up` again")
    coordinator = min((n for n in inventory.nodes if n.tpu_slice == 0), key=lambda n: n.rank)
    return {"MEGASCALE_COORDINATOR_ADDRESS": f"{coordinator.internal_ip}:{MEGASCALE_PORT}",
            "MEGASCALE_NUM_SLICES": str(count), "MEGASCALE_SLICE_ID": str(node.tpu_slice),
            "MEGASCALE_PORT": str(MEGASCALE_PORT)}
