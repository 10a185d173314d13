"""What a failed `pulumi up` says is read as GCE means it: a stockout (with the zones its
LocalizedMessage names as having capacity, also when the provider wrapped the lines), a regional
quota refusal, or neither (left as it is, never retried elsewhere)."""

from __future__ import annotations

from infra.errors import CapacityUnavailable
from infra.providers.gcp.zone_failover import QuotaExceeded, capacity_hints, next_zones, refusal_of

# As pulumi-gcp prints a failed instance create (ComputeOperationError: the message, then the
# first LocalizedMessage), wrapped as a terminal shows it.
STOCKOUT = """  gcp:compute:Instance (gpu-node-0):
    error: creating urn:pulumi:s::p::gcp:compute/instance:Instance::gpu-node-0: The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request.  '(resource type:compute)'.

    A a3-highgpu-8g VM instance with 8 nvidia-h100-80gb accelerator(s) is currently unavailable in the
    us-central1-a zone. Consider trying your request in the us-central1-c, us-central1-b zone(s), which
    currently has capacity to accommodate your request.
"""
QUOTA = ("error: creating urn:pulumi:s::p::gcp:compute/instance:Instance::n0: "
         "Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 in region us-central1.")


def test_a_stockout_names_the_refused_resource_and_the_zones_with_capacity():
    refused = refusal_of(RuntimeError(STOCKOUT))
    assert isinstance(refused, CapacityUnavailable)
    assert str(refused).startswith("gpu-node-0: The zone 'projects/p/zones/us-central1-a' does not have enough")
    assert capacity_hints(refused.provider_text) == ("us-central1-c", "us-central1-b")  # type: ignore[attr-defined]


def test_a_regional_quota_refusal_is_told_apart_from_other_errors():
    assert isinstance(refusal_of(RuntimeError(QUOTA)), QuotaExceeded)
    other = RuntimeError("Error 400: Invalid value for field 'resource.machineType'")
    assert refusal_of(other) is other


def test_named_zones_go_first_and_unlisted_ones_are_not_added():
    assert next_zones(["us-central1-b", "us-central1-c", "us-central1-f"], ("us-central1-f", "us-east1-c")) == [
        "us-central1-f", "us-central1-b", "us-central1-c"]
    assert next_zones(["us-central1-b"], ()) == ["us-central1-b"]
