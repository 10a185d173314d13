"""A GCP stack may name the zones it can live in (`zones: [...]`) or a region (every zone of it
whose catalog entry offers the stack's accelerators) instead of one zone; the candidates are
checked while the stack is read, and `zone` is the one tried first."""

from __future__ import annotations

import pytest

from infra.spec.cluster import ClusterSpec
from infra.spec.zone_choice import candidate_zones
from tests.unit.spec.test_reservation_field import GCP as ONE_ZONE

GCP = {k: v for k, v in ONE_ZONE.items() if k != "zone"}  # a T4 stack on GCP, its zone left to decide


def refusal(**fields) -> str:
    with pytest.raises(ValueError) as refused:
        ClusterSpec.model_validate({**GCP, **fields})
    return str(refused.value)


def test_a_region_means_every_zone_of_it_that_offers_the_gpu():
    spec = ClusterSpec.model_validate({**GCP, "region": "us-central1"})
    assert spec.zones == ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")
    assert spec.zone == "us-central1-a"
    # the H100 is offered in two of them only (catalog.py)
    h100 = ClusterSpec.model_validate({**GCP, "machine_type": "a3-highgpu-8g", "gpu": None, "region": "us-central1"})
    assert h100.zones == ("us-central1-a", "us-central1-c")


def test_listed_zones_are_tried_in_their_order_from_the_first():
    spec = ClusterSpec.model_validate({**GCP, "zones": ["us-central1-c", "us-central1-a"]})
    assert spec.zone == "us-central1-c"
    assert candidate_zones(spec) == ("us-central1-c", "us-central1-a")


def test_the_zone_a_stack_landed_in_stays_its_zone_when_read_again():
    landed = ClusterSpec.model_validate({**GCP, "zones": ["us-central1-a", "us-central1-c"]}).model_copy(
        update={"zone": "us-central1-c"})
    again = ClusterSpec.model_validate(landed.model_dump(mode="json"))
    assert again.zone == "us-central1-c"
    assert candidate_zones(again) == ("us-central1-c", "us-central1-a")


def test_a_listed_zone_without_the_gpu_is_refused_naming_it():
    message = refusal(zones=["us-central1-a", "us-east4-a"])
    assert "zones: us-east4-a does not offer nvidia-tesla-t4" in message
    assert "us-central1-b" in message  # where it is offered


def test_a_zone_outside_the_candidates_is_refused():
    assert "zone 'us-east1-c' is not one of the candidate zones us-central1-a, us-central1-b" in refusal(
        zone="us-east1-c", zones=["us-central1-a", "us-central1-b"])


@pytest.mark.parametrize(("fields", "said"), [
    ({"zones": ["us-central1-a"], "region": "us-central1"}, "name zones or region, not both"),
    ({"region": "mars-north1"}, "unknown region 'mars-north1'"),
    ({"region": "us-east1", "machine_type": "a3-highgpu-8g", "gpu": None}, "no zone of region 'us-east1' offers"),
    ({"zones": ["us-central1-a", "us-central1-a"]}, "zones: us-central1-a appears more than once"),
    ({"zones": ["us-central1-z"]}, "zones: unknown zone 'us-central1-z'"),
    ({"region": "us-central1", "reservation": "t4-block"}, "reservation 't4-block' is in one zone"),
])
def test_bad_zone_choices_are_refused_naming_the_fix(fields, said):
    assert said in refusal(**fields)


def test_the_local_stack_has_no_zones():
    with pytest.raises(ValueError, match="the local stack has no zones to choose from: remove zones/region"):
        ClusterSpec.model_validate({"name": "l", "zones": ["us-central1-a"]})
