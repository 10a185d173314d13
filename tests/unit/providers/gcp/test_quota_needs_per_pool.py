"""What each pool of a stack needs of the project's quota and how its VMs get capacity, from the
stack file alone (infra/providers/gcp/quota_needs.py): `plan` against a project
(tests/integration/providers/gcp/test_plan_capacity.py) shows these needs against what is free."""

from __future__ import annotations

import pytest

from infra.providers.gcp.quota_needs import per_pool
from infra.spec.stack_config import load_stack


@pytest.mark.parametrize("overrides, model", [
    ({}, "on-demand"), ({"spot": True}, "spot"), ({"reservation": "h100-block"}, "reservation h100-block"),
    ({"reservation": "any"}, "any reservation"), ({"reservation": "none"}, "on-demand")])
def test_each_pool_names_how_its_vms_get_capacity(overrides: dict, model: str) -> None:
    (pool,) = per_pool(load_stack("gpu-t4x2", overrides=overrides))
    assert pool.provisioning == model


@pytest.mark.parametrize("stack, overrides, quota_id, units", [
    ("tpu-v5e-16", {}, "TPUV5sLitepodPerProjectPerZoneForTPUAPI", 16),
    ("tpu-v5e-16", {"spot": True}, "TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI", 16),
    ("tpu-v5e-8", {"tpu": {"type": "v4-8"}, "zone": "us-central2-b"}, "TPUV4sPodPerProjectPerZoneForTPUAPI", 8)])
def test_a_tpu_vm_stack_needs_its_slice_in_the_tpu_apis_zonal_quota_and_no_compute_quota(
        stack: str, overrides: dict, quota_id: str, units: int) -> None:
    from infra.providers.gcp import quota

    spec = load_stack(stack, overrides=overrides)
    (pool,) = per_pool(spec)
    assert [(n.metric, n.region, n.amount) for n in pool.needs] == [(quota_id, spec.zone, units)]
    assert quota.needs(spec) == []  # nothing `up` reads from Compute (v4 counts TensorCores: 2 per chip)


def test_hyperdisk_boot_disks_are_not_counted_against_persistent_disk_quota() -> None:
    """A3 Ultra and A4 boot from hyperdisk-balanced, which SSD_TOTAL_GB does not meter; A3 Mega's
    pd-balanced boot disks still count there."""
    def metrics(stack: str) -> set[str]:
        (pool,) = per_pool(load_stack(stack))
        return {n.metric for n in pool.needs}

    assert "SSD_TOTAL_GB" not in metrics("gpu-a4-x2") | metrics("gpu-a3ultra-x2")
    assert "SSD_TOTAL_GB" in metrics("gpu-a3mega-x2")
    # spot VMs (A4 is not offered on demand): Compute has no B200 metric, spot or not; the family quota holds them
    assert "GPUS_PER_GPU_FAMILY:NVIDIA_B200" in metrics("gpu-a4-x2")
