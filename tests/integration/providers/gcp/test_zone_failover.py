"""A stack naming several zones is placed whole in one of them: on a stockout, `up` goes next to
the zones GCE's refusal names as having capacity (not blindly to the next one), and what the
refused attempt placed in the stocked-out zone does not outlive it."""

from __future__ import annotations

from infra.providers.capacity_wait import CapacityWait
from infra.providers.gcp import realizer
from tests.fakes.sim_stacks import Project, make_gcp, simulated_gcp  # noqa: F401 (fixtures)

A, B, C = "us-central1-a", "us-central1-b", "us-central1-c"


def zones_of(project: Project) -> dict[str, str]:
    """Each VM of the project and the zone it is in."""
    return {name: vm["zone"].rsplit("/", 1)[-1] for name, vm in project.instances().items()}


def test_a_stockout_naming_a_zone_with_capacity_sends_the_cluster_there_without_trying_the_next(make_gcp) -> None:
    # n1-standard-8 is out in a and b; a's refusal names c and f (the zones of the region that have it)
    gcp: Project = make_gcp(stockouts=[{"zone": A, "machine_type": "n1-standard-8"},
                                       {"zone": B, "machine_type": "n1-standard-8"}])
    # the worker pool's machines are not out anywhere: the refused attempt may place them in a
    pools = [{"role": "chief"}, {"role": "worker", "count": 1, "machine_type": "n1-standard-4",
                                 "gpu": {"type": "nvidia-tesla-t4", "count": 1}}]
    spec = gcp.stack("gpu-t4x2", zones=[A, B, C], pools=pools)
    inventory = realizer.up(spec, gcp.progress)
    tried = [(a["zone"], a["outcome"]) for a in inventory.placement]
    assert tried == [(A, "no capacity"), (C, "up")]
    assert inventory.placement[0]["capacity_in"] == [C, "us-central1-f"]
    assert "does not have enough resources available" in inventory.placement[0]["reason"]
    assert set(zones_of(gcp).values()) == {C}  # every node in c, nothing left in a
    assert realizer.spec(spec.name).zone == C  # what repair and down hand the program
    assert any(line.startswith("placed in zone us-central1-c after 2 attempt(s)") for line in gcp.said)
    # a zone earlier in the list has capacity again: `up` of the running stack leaves it where it is
    gcp.admin("PUT", "stockouts", [])
    again = realizer.up(spec, gcp.progress)
    assert [a["zone"] for a in again.placement] == [C]
    assert set(zones_of(gcp).values()) == {C}
    assert realizer.down(spec.name, progress=gcp.progress) is True
    gcp.next_command()
    assert gcp.instances() == {}


def test_zones_without_hints_are_tried_in_their_order(make_gcp) -> None:
    # every us-central1 zone is out: the refusals name no zone, so the list's order decides
    gcp: Project = make_gcp(stockouts=[{"zone": z, "machine_type": "n1-standard-8"}
                                       for z in (A, B, C, "us-central1-f")])
    spec = gcp.stack("gpu-t4x2", zones=[A, B, "us-east1-c"])
    inventory = realizer.up(spec, gcp.progress)
    assert [(a["zone"], a["outcome"], a["capacity_in"]) for a in inventory.placement] == [
        (A, "no capacity", []), (B, "no capacity", []), ("us-east1-c", "up", [])]
    # each refused zone's attempt is told as a wait for capacity, which a run's ledger keeps
    waits = [line for line in gcp.said if isinstance(line, CapacityWait)]
    assert [w.split(":")[0] for w in waits] == [f"zone {A}", f"zone {B}"]
    assert all(w.ended > w.started for w in waits)
    assert set(zones_of(gcp).values()) == {"us-east1-c"}
    assert realizer.down(spec.name, progress=gcp.progress) is True


def test_a_candidate_region_without_quota_is_skipped_before_anything_is_created_there(make_gcp) -> None:
    gcp: Project = make_gcp(quotas={"us-central1": {"NVIDIA_T4_GPUS": 0}, "us-east1": {"NVIDIA_T4_GPUS": 8}})
    spec = gcp.stack("gpu-t4x2", zones=[A, "us-east1-c"])
    inventory = realizer.up(spec, gcp.progress)
    assert [(a["zone"], a["outcome"]) for a in inventory.placement] == [(A, "no quota"), ("us-east1-c", "up")]
    assert "quota NVIDIA_T4_GPUS in us-central1: limit 0" in inventory.placement[0]["reason"]
    assert set(zones_of(gcp).values()) == {"us-east1-c"}
    assert gcp.names("subnetworks", "us-central1") == set()  # the refused region got nothing
    assert realizer.down(spec.name, progress=gcp.progress) is True


def test_a_tpu_refused_for_insufficient_reserved_capacity_goes_to_the_next_zone(make_gcp) -> None:
    # The TPU API's other wording of a stockout, code 8, for a create that used no reservation
    # (skypilot-org/skypilot#4579): a capacity refusal, so the next zone is tried.
    gcp: Project = make_gcp(stockouts=[{"zone": "us-west4-a", "tpu_words": "insufficient_reserved_capacity"}],
                            services=["compute.googleapis.com", "tpu.googleapis.com"])
    spec = gcp.stack("tpu-v5e-8", zones=["us-west4-a", "us-central1-a"])
    inventory = realizer.up(spec, gcp.progress)
    assert [(a["zone"], a["outcome"]) for a in inventory.placement] == [("us-west4-a", "no capacity"),
                                                                        ("us-central1-a", "up")]
    assert "Insufficient reserved capacity" in inventory.placement[0]["reason"]
    assert realizer.spec(spec.name).zone == "us-central1-a"
    assert realizer.down(spec.name, progress=gcp.progress) is True
