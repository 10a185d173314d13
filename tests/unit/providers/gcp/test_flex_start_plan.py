"""What a flex-start stack's plan declares: GKE node pools with node_config.flex_start and a max run
duration (the stack's TTL), VMs with FLEX_START scheduling and the deadline as their create timeout,
and capacity needed from the preemptible quota, as GCE meters flex-start VMs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infra.providers.gcp.program.mocks import evaluate
from infra.providers.gcp.quota_needs import per_pool
from infra.spec.cluster import ClusterSpec
from policy.declared import Resource
from policy.rules import check_resources

BASE = {"name": "f", "provider": "gcp", "project": "my-project", "zone": "us-central1-a", "nodes": 2,
        "machine_type": "g2-standard-8", "provisioning": "flex-start", "ttl_hours": 10,
        "ssh": {"source_ranges": ["203.0.113.7/32"]}}


def test_a_gke_flex_start_stack_declares_flex_start_node_pools_limited_to_the_ttl() -> None:
    spec = ClusterSpec.model_validate({**BASE, "kind": "gke"})
    (pool,) = evaluate(spec).of_type("container/nodePool:NodePool")
    config = pool.inputs["nodeConfig"]
    assert config["flexStart"] is True and config["maxRunDuration"] == "36000s"
    assert not config.get("spot")


def test_a_standard_gke_pool_declares_no_flex_start() -> None:
    spec = ClusterSpec.model_validate({**BASE, "kind": "gke", "provisioning": "standard"})
    (pool,) = evaluate(spec).of_type("container/nodePool:NodePool")
    assert "flexStart" not in pool.inputs["nodeConfig"] and "maxRunDuration" not in pool.inputs["nodeConfig"]


def test_flex_start_vms_are_planned_as_flex_start_on_preemptible_quota() -> None:
    (pool,) = per_pool(ClusterSpec.model_validate(BASE))
    assert pool.provisioning == "flex-start"
    metrics = {need.metric for need in pool.needs}
    assert "PREEMPTIBLE_NVIDIA_L4_GPUS" in metrics and "NVIDIA_L4_GPUS" not in metrics


def test_a_gke_flex_start_pool_is_autoscaled_from_zero_unrepaired_and_on_no_reservation() -> None:
    # Google's preconditions for a flex-start pool (Cluster Toolkit gke-node-pool/main.tf)
    spec = ClusterSpec.model_validate({**BASE, "kind": "gke"})
    declared = evaluate(spec)
    (pool,) = declared.of_type("container/nodePool:NodePool")
    assert not check_resources([Resource(r.type, r.name, r.inputs) for r in declared.resources])
    assert "nodeCount" not in pool.inputs and pool.inputs["initialNodeCount"] == 0
    assert pool.inputs["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"}
    assert pool.inputs["management"] == {"autoRepair": False, "autoUpgrade": True}
    assert pool.inputs["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}


def test_a_standard_gke_pool_keeps_its_static_size_and_auto_repair() -> None:
    spec = ClusterSpec.model_validate({**BASE, "kind": "gke", "provisioning": "standard"})
    (pool,) = evaluate(spec).of_type("container/nodePool:NodePool")
    assert pool.inputs["nodeCount"] == 2 and "autoscaling" not in pool.inputs
    assert pool.inputs["management"]["autoRepair"] is True


def test_a_gke_flex_start_stack_naming_a_reservation_is_refused_naming_both() -> None:
    with pytest.raises(ValidationError, match="provisioning 'flex-start' with reservation 'my-res'.*consume no reservation"):
        ClusterSpec.model_validate({**BASE, "kind": "gke", "reservation": "my-res"})
