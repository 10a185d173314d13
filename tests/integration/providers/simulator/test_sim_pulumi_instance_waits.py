"""The stand-in's google_compute_instance create waits as terraform-provider-google's
resourceComputeInstanceCreate (google/services/compute/resource_compute_instance.go) does: the
insert operation within the create timeout, its failure dropping the resource from the state
(`d.SetId("")`); then waitUntilInstanceHasDesiredStatus(RUNNING), a retry.StateChangeConf
(terraform-plugin-sdk helper/retry/state.go) within the *update* timeout over the provider's
statuses without PENDING, which fails at once on a status outside them, the resource kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from infra.retry import on_results
from tests.fakes.sim_fixtures import RunningSim, make_sim  # noqa: F401 (fixture)
from tests.fakes.sim_pulumi_gcp_project import GcpProject

PROJECT = "sim-waits"
FLEX = {"provisioning_model": "FLEX_START", "automatic_restart": False, "on_host_maintenance": "TERMINATE",
        "instance_termination_action": "DELETE", "max_run_duration": {"seconds": 3600}}


def started(make_sim: Any, tmp_path: Path, server: Path, prefix: str,  # noqa: F811
            **delays: float) -> tuple[RunningSim, GcpProject]:
    """The project, and a `pulumi` whose commands the session's fork server runs (a fresh
    interpreter per command re-imports the SDK, ~1.5 CPU-s each, 8-10 commands per `up`)."""
    sim: RunningSim = make_sim(project=PROJECT, delays=delays)
    sim.enable("cloudresourcemanager.googleapis.com", "compute.googleapis.com", "storage.googleapis.com",
               "iam.googleapis.com")
    return sim, GcpProject(tmp_path, sim.url, PROJECT, prefix, server)


def vm_of(sim: RunningSim, name: str) -> dict[str, Any] | None:
    status, body = sim.http("GET", f"/compute/v1/projects/{PROJECT}/zones/us-central1-a/instances/{name}")
    return body if status == 200 else None


def in_state(stack: Any) -> dict[str, dict[str, Any]]:
    deployment = json.loads(json.dumps(stack.export_stack().deployment))
    return {r["urn"].rsplit("::", 1)[-1]: r for r in deployment.get("resources") or []}


def test_a_pending_flex_start_vm_fails_the_wait_at_once_and_stays_in_the_state(make_sim, tmp_path, pulumi_server):  # noqa: F811
    # the create timeout is far longer than the grant: the provider does not wait for it
    sim, project = started(make_sim, tmp_path, pulumi_server, "t-pend", flex_start_grant=3.0)
    project.declare(machine_type="g2-standard-8", scheduling=FLEX, create_timeout="1h")
    stack = project.stack("pend")
    with pytest.raises(auto.CommandError) as failure:
        stack.up()
    assert ("Error waiting for status: Error waiting for instance to reach desired status RUNNING: "
            "unexpected state 'PENDING', wanted target 'RUNNING'") in str(failure.value)
    kept = in_state(stack)["t-pend-vm"]
    assert kept["id"].endswith("/instances/t-pend-vm") and kept.get("initErrors")
    assert vm_of(sim, "t-pend-vm")["status"] == "PENDING"
    granted = on_results(lambda vm: vm["status"] != "RUNNING", within=120, first=0.2, cap=1.0)(
        lambda: vm_of(sim, "t-pend-vm"))  # the simulator grants it after flex_start_grant, then it boots
    assert granted["status"] == "RUNNING"
    result = stack.up()  # an empty update of the resource with init errors: it is read
    assert result.outputs["internal_ip"].value == vm_of(sim, "t-pend-vm")["networkInterfaces"][0]["networkIP"]
    assert not in_state(stack)["t-pend-vm"].get("initErrors")
    stack.destroy()
    assert vm_of(sim, "t-pend-vm") is None


def test_an_insert_outlasting_the_create_timeout_drops_the_vm_from_the_state(make_sim, tmp_path, pulumi_server):  # noqa: F811
    sim, project = started(make_sim, tmp_path, pulumi_server, "t-slow", instance_insert=60.0)
    project.declare(create_timeout="2s")
    stack = project.stack("slow")
    with pytest.raises(auto.CommandError) as failure:
        stack.up()
    assert "Error waiting for instance to create: timeout while waiting for state to become 'DONE'" in str(
        failure.value)
    assert "t-slow-vm" not in in_state(stack)  # d.SetId(""): destroy will not see it
    assert vm_of(sim, "t-slow-vm") is not None  # ... although GCE has it


def test_the_wait_for_running_takes_the_update_timeout_not_the_create_timeout(make_sim, tmp_path, pulumi_server):  # noqa: F811
    # booting (STAGING -> RUNNING, 4 s) outlasts a 2 s create timeout, not the default update timeout
    sim, project = started(make_sim, tmp_path, pulumi_server, "t-boot", instance_boot=4.0)
    project.declare(create_timeout="2s")
    project.stack("boot").up()
    assert vm_of(sim, "t-boot-vm")["status"] == "RUNNING"


def test_an_update_timeout_shorter_than_the_boot_fails_the_create_keeping_the_vm(make_sim, tmp_path, pulumi_server):  # noqa: F811
    sim, project = started(make_sim, tmp_path, pulumi_server, "t-upd", instance_boot=30.0)
    project.declare(update_timeout="1s")
    stack = project.stack("upd")
    with pytest.raises(auto.CommandError) as failure:
        stack.up()
    assert ("Error waiting for instance to reach desired status RUNNING: timeout while waiting for state to "
            "become 'RUNNING' (last state: 'STAGING'") in str(failure.value)
    assert in_state(stack)["t-upd-vm"].get("initErrors") and vm_of(sim, "t-upd-vm") is not None
