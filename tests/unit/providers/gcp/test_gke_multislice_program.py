"""A GKE multislice stack (tpu.slices on kind gke) as the Pulumi program declares it under mocks:
one multi-host slice node pool per slice, each named as the launcher pins that slice's Job to it."""

from __future__ import annotations

from infra.providers.gcp.program.mocks import evaluate
from infra.spec import catalog
from infra.spec.gke_names import slice_pool
from infra.spec.stack_config import load_stack

STACK = "gke-tpu-v5e-2x16"


def test_every_slice_is_a_multi_host_pool_with_the_slices_machine_topology_and_hosts():
    spec = load_stack(STACK)
    tpu = catalog.TPUS["v5litepod-16"]
    pools = sorted(evaluate(spec, None).of_type("container/nodePool:NodePool"), key=lambda p: p.inputs["name"])
    assert [p.inputs["name"] for p in pools] == [slice_pool(spec, 0), slice_pool(spec, 1)]
    for pool in pools:
        assert pool.inputs["nodeCount"] == tpu.hosts == 4
        assert pool.inputs["nodeConfig"]["machineType"] == tpu.gke_machine_type == "ct5lp-hightpu-4t"
        assert pool.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}
