"""Capacity in the simulator: stockouts (from the project file, or switched on while it runs),
reservations that VMs consume, compact placement policies."""

from __future__ import annotations

from tests.fakes.sim_compute import PROJECT, REGION, ZONE, ComputeSim, csim, instance_body, make_csim  # noqa: F401


def insert(sim: ComputeSim, body: dict, zone: str = ZONE) -> dict:
    status, op = sim.http("POST", sim.compute(f"zones/{zone}/instances"), body)
    assert status == 200, op
    return op


def test_a_stockout_fails_the_insert_as_gce_does_naming_the_shape_and_other_zones(make_csim):
    sim = make_csim(stockouts=[{"zone": ZONE, "accelerator": "nvidia-tesla-t4"}])
    sim.network()
    op = insert(sim, instance_body("t4-0", gpu=("nvidia-tesla-t4", 1)))
    assert op["httpErrorStatusCode"] == 503
    error = op["error"]["errors"][0]
    assert error["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    assert error["message"] == (f"The zone 'projects/{PROJECT}/zones/{ZONE}' does not have enough resources "
                                "available to fulfill the request.  '(resource type:compute)'.")
    details = {k: v for d in error["errorDetails"] for k, v in d.items()}
    assert details["errorInfo"]["reason"] == "resource_availability"
    assert details["errorInfo"]["metadatas"] == {"attachment": "nvidia-tesla-t4:1", "vmType": "n1-standard-8",
                                                 "zone": ZONE, "zonesAvailable": "us-central1-b,us-central1-c,us-central1-f"}
    assert details["localizedMessage"]["message"].startswith(
        "A n1-standard-8 VM instance with 1 nvidia-tesla-t4 accelerator(s) is currently unavailable in the "
        "us-central1-a zone. Consider trying your request in the us-central1-b, us-central1-c, us-central1-f zone(s)")
    assert sim.http("GET", sim.compute(f"zones/{ZONE}/instances/t4-0"))[0] == 404
    assert "error" not in insert(sim, instance_body("cpu-0"))  # other shapes still fit


def test_a_stockout_names_only_zones_that_offer_its_gpu(make_csim):
    # the P100 is offered in us-central1-c and -f only (catalog.py): a and b cannot hold the shape
    sim = make_csim(stockouts=[{"zone": "us-central1-c", "accelerator": "nvidia-tesla-p100"}])
    sim.network()
    op = insert(sim, instance_body("p100-0", gpu=("nvidia-tesla-p100", 1)), zone="us-central1-c")
    details = {k: v for d in op["error"]["errors"][0]["errorDetails"] for k, v in d.items()}
    assert details["errorInfo"]["metadatas"]["zonesAvailable"] == "us-central1-f"
    assert "Consider trying your request in the us-central1-f zone(s)" in details["localizedMessage"]["message"]


def test_stockouts_switch_on_and_off_while_the_simulator_runs(csim):
    csim.network()
    assert "error" not in insert(csim, instance_body("spot-0", machine="g2-standard-8", spot=True))
    csim.admin("PUT", "stockouts", [{"zone": ZONE, "machine_type": "g2-standard-8", "spot": True}])
    assert insert(csim, instance_body("spot-1", machine="g2-standard-8", spot=True))["error"]["errors"][0]["code"] \
        == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    assert "error" not in insert(csim, instance_body("std-0", machine="g2-standard-8"))  # on-demand unaffected
    csim.admin("PUT", "stockouts", [])
    assert "error" not in insert(csim, instance_body("spot-1", machine="g2-standard-8", spot=True))


def test_a_stopped_vm_may_not_start_again_in_a_stocked_out_zone(csim):
    csim.network()
    insert(csim, instance_body("vm-0"))
    csim.http("POST", csim.compute(f"zones/{ZONE}/instances/vm-0/stop"))
    csim.advance(1)
    csim.admin("PUT", "stockouts", [{"zone": ZONE}])
    status, op = csim.http("POST", csim.compute(f"zones/{ZONE}/instances/vm-0/start"))
    assert op["error"]["errors"][0]["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    assert csim.http("GET", csim.compute(f"zones/{ZONE}/instances/vm-0"))[1]["status"] == "TERMINATED"


def reservation(sim: ComputeSim, name: str, count: int, required: bool = False, gpu: str | None = None) -> None:
    props = {"machineType": "n1-standard-8"}
    if gpu:
        props["guestAccelerators"] = [{"acceleratorType": gpu, "acceleratorCount": 1}]
    status, answer = sim.http("POST", sim.compute(f"zones/{ZONE}/reservations"), {
        "name": name, "specificReservationRequired": required,
        "specificReservation": {"count": str(count), "instanceProperties": props}})
    assert status == 200, answer


def in_use(sim: ComputeSim, name: str) -> str:
    return sim.http("GET", sim.compute(f"zones/{ZONE}/reservations/{name}"))[1]["specificReservation"]["inUseCount"]


def test_matching_vms_consume_a_reservation_and_are_placed_despite_a_stockout(make_csim):
    sim = make_csim(stockouts=[{"zone": ZONE, "machine_type": "n1-standard-8"}])
    sim.network()
    reservation(sim, "r", 2)
    assert "error" not in insert(sim, instance_body("a"))
    assert "error" not in insert(sim, instance_body("b"))
    assert in_use(sim, "r") == "2"
    full = insert(sim, instance_body("c"))  # the reservation is used up: the stockout applies
    assert full["error"]["errors"][0]["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    spot = insert(sim, instance_body("s", spot=True))  # spot VMs never consume reservations
    assert spot["error"]["errors"][0]["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"


def test_a_specific_reservation_must_exist_and_match(csim):
    csim.network()
    reservation(csim, "only-specific", 1, required=True)
    assert "error" not in insert(csim, instance_body("any"))
    assert in_use(csim, "only-specific") == "0"  # required: ANY_RESERVATION does not take it
    named = {"consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
             "values": ["only-specific"]}
    assert "error" not in insert(csim, instance_body("named", reservationAffinity=named))
    assert in_use(csim, "only-specific") == "1"
    status, _ = csim.http("POST", csim.compute(f"zones/{ZONE}/instances"),
                          instance_body("again", reservationAffinity=named))
    assert status == 400  # full
    missing = {**named, "values": ["nope"]}
    status, answer = csim.http("POST", csim.compute(f"zones/{ZONE}/instances"),
                               instance_body("lost", reservationAffinity=missing))
    assert status == 404 and f"projects/{PROJECT}/zones/{ZONE}/reservations/nope" in answer["error"]["message"]


def test_a_compact_placement_policy_cannot_go_while_vms_use_it(csim):
    csim.network()
    path = csim.compute(f"regions/{REGION}/resourcePolicies")
    status, _ = csim.http("POST", path, {"name": "compact", "groupPlacementPolicy": {"collocation": "COLLOCATED",
                                                                                    "vmCount": 2}})
    assert status == 200
    policy = f"projects/{PROJECT}/regions/{REGION}/resourcePolicies/compact"
    assert "error" not in insert(csim, instance_body("a", resourcePolicies=[policy]))
    status, answer = csim.http("DELETE", f"{path}/compact")
    assert status == 400 and answer["error"]["errors"][0]["reason"] == "resourceInUseByAnotherResource"
    csim.http("DELETE", csim.compute(f"zones/{ZONE}/instances/a"))
    assert csim.http("DELETE", f"{path}/compact")[0] == 200
    assert csim.http("GET", f"{path}/compact")[0] == 404
