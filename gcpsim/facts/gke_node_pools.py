"""What GKE takes as a node pool, as facts of the simulated world (not the product's beliefs).

Flex-start node pools (NodeConfig.flexStart, container v1 discovery document: "Flex Start flag for
enabling Flex Start VM."): each row is (what it holds, the refusal's message, its source). The
preconditions are Google's Cluster Toolkit's (modules/compute/gke-node-pool/main.tf, the
`enable_flex_start` preconditions; examples/gke-consumption-options/dws-flex-start/README.md: "DWS
Flex Start does not work with static nodes"). Chosen: the messages. No source quoted GKE's own
words for these refusals; they name the field and what GKE needs, as a 400 INVALID_ARGUMENT.

Additional node networks (NodeNetworkConfig.additionalNodeNetworkConfigs): network and
subnetwork are names ("Name of the VPC where the additional interface belongs", "Name of the
subnetwork where the additional interface belongs": container v1 AdditionalNodeNetworkConfig;
terraform-provider-google resource_container_node_pool.go says the same). Chosen: a resource path
there is refused (no source shows what GKE does with one).
"""

from __future__ import annotations

from typing import Any, Callable

Pool = dict[str, Any]


def _config(pool: Pool) -> dict[str, Any]:
    return pool.get("config") or {}


def _autoscaled(pool: Pool) -> bool:
    return bool((pool.get("autoscaling") or {}).get("enabled"))


FLEX_START: tuple[tuple[Callable[[Pool], bool], str, str], ...] = (
    (lambda p: not (_config(p).get("spot") or _config(p).get("preemptible")),
     "Flex-start node pools cannot use Spot VMs or preemptible VMs: node_pool.config.spot must be false.",
     'cluster-toolkit gke-node-pool/main.tf: "Both enable_flex_start and spot consumption option cannot be '
     'set to true at the same time."'),
    (lambda p: (p.get("management") or {}).get("autoRepair") is False,
     "Flex-start node pools do not support node auto-repair: node_pool.management.auto_repair must be false.",
     'cluster-toolkit gke-node-pool/main.tf: "enable_flex_start needs node auto_repair set to false."'),
    (lambda p: (_config(p).get("reservationAffinity") or {}).get("consumeReservationType") == "NO_RESERVATION",
     "Flex-start node pools consume no reservation: "
     "node_pool.config.reservation_affinity.consume_reservation_type must be NO_RESERVATION.",
     'cluster-toolkit gke-node-pool/main.tf: "enable_flex_start requires '
     "reservation_affinity.consume_reservation_type to be 'NO_RESERVATION'.\""),
    (_autoscaled,
     "Flex-start node pools do not work with static nodes: enable node_pool.autoscaling "
     "(the cluster autoscaler adds flex-start nodes when pods wait for them).",
     'cluster-toolkit gke-node-pool/main.tf: "enable_flex_start does not work with static_node_count."; '
     'examples/gke-consumption-options/dws-flex-start/README.md'),
)


def flex_start_refusal(pool: Pool) -> str | None:
    """The message of the first flex-start precondition the pool breaks, or None."""
    if not _config(pool).get("flexStart"):
        return None
    return next((message for holds, message, _ in FLEX_START if not holds(pool)), None)


def network_name_refusal(pool: Pool) -> str | None:
    """A resource path where an additional node network's name belongs, as GKE's
    `Invalid value for field` form (the form container.py uses for fields)."""
    configs = (pool.get("networkConfig") or {}).get("additionalNodeNetworkConfigs") or []
    for i, config in enumerate(configs):
        for field in ("network", "subnetwork"):
            if "/" in str(config.get(field) or ""):
                return (f'Invalid value for field "node_pool.network_config.additional_node_network_configs[{i}].'
                        f'{field}": "{config[field]}". Must be the name of the {field}, not its path.')
    return None
