"""Provisioning models and reservations in the simulator, as its own facts say
(simulator/facts/provisioning_models.py, reservation_policies.py): A3 Ultra and A4 are not created
on demand; a RESERVATION_BOUND VM names its reservation; a VM with a placement policy consumes a
plain reservation only with the reservation's own policies. Through the real client
(google-cloud-compute, REST) and raw HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.api_core.exceptions import BadRequest
from google.cloud import compute_v1

from tests.fakes.sim_compute import PROJECT, csim, instance_body, make_csim  # noqa: F401

ZONE, REGION = "us-central1-b", "us-central1"  # where a3-ultragpu-8g and a4-highgpu-8g exist
A3U = "a3-ultragpu-8g"


def insert(csim: Any, body: dict[str, Any]) -> None:
    csim.client(compute_v1.InstancesClient).insert(
        project=PROJECT, zone=ZONE, instance_resource=compute_v1.Instance.from_json(json.dumps(body))).result(timeout=10)


def reserve(csim: Any, name: str, machine: str = A3U, **extra: Any) -> None:
    status, body = csim.http("POST", csim.compute(f"zones/{ZONE}/reservations"), {
        "name": name, "specificReservationRequired": True,
        "specificReservation": {"count": 2, "instanceProperties": {"machineType": machine}}, **extra})
    assert status == 200, body


def on(reservation: str) -> dict[str, Any]:
    return {"reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                                    "key": "compute.googleapis.com/reservation-name", "values": [reservation]}}


def bound(body: dict[str, Any]) -> dict[str, Any]:
    body["scheduling"] = {"provisioningModel": "RESERVATION_BOUND", "automaticRestart": True,
                          "onHostMaintenance": "TERMINATE"}
    return body


@pytest.mark.parametrize("machine", [A3U, "a4-highgpu-8g"])
def test_an_a3_ultra_or_a4_vm_on_demand_is_refused_and_nothing_is_made(csim, machine):
    csim.network(region=REGION)
    body = instance_body("vm-od", machine=machine, zone=ZONE)
    body["scheduling"]["onHostMaintenance"] = "TERMINATE"
    with pytest.raises(BadRequest) as refused:
        insert(csim, body)
    assert refused.value.message.endswith(
        "Invalid value for field 'resource.scheduling.provisioningModel': 'STANDARD'. Machine type "
        f"{machine} is offered with the RESERVATION_BOUND, FLEX_START, SPOT provisioning models only.")
    assert csim.http("GET", csim.compute(f"zones/{ZONE}/instances/vm-od"))[0] == 404


def test_an_a3_ultra_vm_is_created_as_spot(csim):
    csim.network(region=REGION)
    insert(csim, instance_body("vm-spot", machine=A3U, zone=ZONE, spot=True))
    assert csim.http("GET", csim.compute(f"zones/{ZONE}/instances/vm-spot"))[1]["scheduling"]["provisioningModel"] == "SPOT"


def test_a_reservation_bound_vm_runs_on_the_reservation_it_names_and_needs_to_name_one(csim):
    csim.network(region=REGION)
    reserve(csim, "h200-block", deploymentType="DENSE")
    insert(csim, bound(instance_body("vm-rb", machine=A3U, zone=ZONE, **on("h200-block"))))
    held = csim.http("GET", csim.compute(f"zones/{ZONE}/reservations/h200-block"))[1]
    assert held["specificReservation"]["inUseCount"] == "1"
    status, body = csim.http("POST", csim.compute(f"zones/{ZONE}/instances"),
                             bound(instance_body("vm-any", machine=A3U, zone=ZONE)))
    assert status == 400 and body["error"]["message"] == (
        "Invalid value for field 'resource.scheduling.provisioningModel': 'RESERVATION_BOUND'. A RESERVATION_BOUND "
        "instance needs reservationAffinity.consumeReservationType SPECIFIC_RESERVATION, not ANY_RESERVATION.")


def test_a_placement_policy_on_a_plain_reservation_is_refused_on_a_dense_one_taken(csim):
    csim.network(region=REGION)
    status, _ = csim.http("POST", csim.compute(f"regions/{REGION}/resourcePolicies"),
                          {"name": "pp", "groupPlacementPolicy": {"collocation": "COLLOCATED"}})
    assert status == 200
    policy = f"projects/{PROJECT}/regions/{REGION}/resourcePolicies/pp"
    reserve(csim, "plain")
    reserve(csim, "dense", deploymentType="DENSE")
    status, body = csim.http("POST", csim.compute(f"zones/{ZONE}/instances"),
                             bound(instance_body("vm-p", machine=A3U, zone=ZONE, resourcePolicies=[policy], **on("plain"))))
    assert status == 400 and body["error"]["errors"][0]["reason"] == "invalid"
    assert body["error"]["message"].startswith("Invalid value for field 'resource.resourcePolicies': ")
    assert f"Reservation 'projects/{PROJECT}/zones/{ZONE}/reservations/plain' is not a DENSE reservation" \
        in body["error"]["message"]
    insert(csim, bound(instance_body("vm-d", machine=A3U, zone=ZONE, resourcePolicies=[policy], **on("dense"))))


def test_a_plain_reservation_takes_its_own_placement_policy(csim):
    csim.network(region=REGION)
    csim.http("POST", csim.compute(f"regions/{REGION}/resourcePolicies"),
              {"name": "own", "groupPlacementPolicy": {"collocation": "COLLOCATED"}})
    policy = f"projects/{PROJECT}/regions/{REGION}/resourcePolicies/own"
    reserve(csim, "with-policy", resourcePolicies={"placement": policy})
    insert(csim, bound(instance_body("vm-o", machine=A3U, zone=ZONE, resourcePolicies=[policy], **on("with-policy"))))
