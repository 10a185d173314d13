"""The simulator's pulumi applying pulumi-gcp resources to the GCP simulator, driven by the
Automation API as trainctl's realizer drives it: the REST calls a Terraform-bridged provider
makes, and the engine's create/update/replace/delete/import/refresh decisions over them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from pulumi import automation as auto

from tests.fakes.sim_fixtures import PROJECT, RunningSim, start_sim
from tests.fakes.sim_machines_fixtures import wait_for
from tests.fakes.sim_pulumi_gcp_project import GcpProject, mutations, recorded_requests

PATH = "/compute/v1/projects/sim-project"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSim]:
    running = start_sim(tmp_path_factory.mktemp("sim"))
    running.enable("cloudresourcemanager.googleapis.com", "compute.googleapis.com", "storage.googleapis.com",
                   "iam.googleapis.com")
    yield running
    running.simulator.stop()


@pytest.fixture
def calls(sim: RunningSim) -> Iterator[list[tuple[str, str]]]:
    """Every request the simulator answers while the test runs: (verb, path)."""
    with recorded_requests(sim.simulator) as seen:
        yield seen


def project_for(sim: RunningSim, tmp_path: Path, prefix: str, server: Path) -> GcpProject:
    return GcpProject(tmp_path, sim.url, PROJECT, prefix, server)


def instance(sim: RunningSim, name: str) -> dict[str, Any] | None:
    status, body = sim.http("GET", f"{PATH}/zones/us-central1-a/instances/{name}")
    return body if status == 200 else None


def test_up_exports_what_gcp_computed_a_second_changes_nothing_labels_change_in_place_disks_replace_refresh_recreates(
        sim, tmp_path, pulumi_server, calls):
    # One stack's lifecycle, each step checked in turn (each was a test of its own bringing the
    # same program up first).
    project = project_for(sim, tmp_path, "t-life", pulumi_server)
    stack = project.stack("life")
    result = stack.up()
    vm = instance(sim, "t-life-vm")
    assert vm is not None and vm["status"] == "RUNNING"
    nic = vm["networkInterfaces"][0]
    assert result.outputs["internal_ip"].value == nic["networkIP"]
    assert result.outputs["external_ip"].value == nic["accessConfigs"][0]["natIP"]
    assert vm["serviceAccounts"][0]["scopes"] == ["https://www.googleapis.com/auth/cloud-platform"]
    assert vm["labels"] == {"goog-pulumi-provisioned": "true"}  # pulumi-gcp's attribution label
    assert result.outputs["bucket_url"].value == f"gs://{project.base['bucket']}"

    # a second up of the same program sends no mutating call
    calls.clear()
    result = stack.up()
    assert mutations(calls) == []
    assert set(result.summary.resource_changes) == {"same"}

    # a changed label is set in place
    project.declare(vm_labels={"team": "ml"})
    calls.clear()
    stack.up()
    labelled = instance(sim, "t-life-vm")
    assert labelled["id"] == vm["id"] and labelled["labels"]["team"] == "ml"
    assert mutations(calls) == [("POST", f"{PATH}/zones/us-central1-a/instances/t-life-vm/setLabels")]

    # a changed boot disk replaces the instance, deleting it first
    project.declare(vm_labels={"team": "ml"}, disk_gb=30)
    calls.clear()
    stack.up()
    assert instance(sim, "t-life-vm")["id"] != labelled["id"]
    vm_calls = [c for c in mutations(calls) if "/instances" in c[1]]
    assert vm_calls == [("DELETE", f"{PATH}/zones/us-central1-a/instances/t-life-vm"),
                        ("POST", f"{PATH}/zones/us-central1-a/instances")]

    # up --refresh recreates an instance deleted outside pulumi
    status, op = sim.http("DELETE", f"{PATH}/zones/us-central1-a/instances/t-life-vm")
    assert status == 200
    wait_for(lambda: instance(sim, "t-life-vm") is None, timeout=30, what="the deleted VM gone")
    stack.up()
    assert instance(sim, "t-life-vm") is None  # the state still says it exists
    stack.up(refresh=True)
    assert instance(sim, "t-life-vm")["status"] == "RUNNING"


def test_destroy_leaves_only_the_retained_bucket_and_a_later_up_adopts_it_by_import(sim, tmp_path, pulumi_server):
    project = project_for(sim, tmp_path, "t-keep", pulumi_server)
    stack = project.stack("keep")
    stack.up()
    stack.destroy()
    bucket = project.base["bucket"]
    assert sim.http("GET", f"/storage/v1/b/{bucket}")[0] == 200
    assert instance(sim, "t-keep-vm") is None
    assert sim.http("GET", f"{PATH}/global/networks/t-keep-vpc")[0] == 404
    with pytest.raises(auto.CommandError, match="googleapi: Error 409"):
        stack.up()  # the kept bucket's name is taken by the kept bucket
    stack.destroy()
    # Importing is strict, as Pulumi's import option is: what the program declares must match.
    project.declare(import_bucket=bucket, bucket_labels={"adopted": "yes"})
    with pytest.raises(auto.CommandError, match="inputs to import do not match the existing resource"):
        stack.up()
    stack.destroy()
    # The documented way: ignore what differs for the import, then update it in place.
    project.declare(import_bucket=bucket, bucket_labels={"adopted": "yes"}, bucket_ignore_changes=["labels"])
    stack.up()
    project.declare(bucket_labels={"adopted": "yes"})
    stack.up()
    assert sim.http("GET", f"/storage/v1/b/{bucket}")[1]["labels"]["adopted"] == "yes"


def test_a_mandatory_policy_violation_fails_up_before_the_resource_is_created(sim, tmp_path, pulumi_server):
    project = project_for(sim, tmp_path, "t-policy", pulumi_server)
    project.declare(ssh_from=["0.0.0.0/0"], instance=False)
    with pytest.raises(auto.CommandError) as failure:
        project.stack("policy").up(policy_packs=[str(Path(__file__).resolve().parents[4] / "policy")])
    assert "firewall-no-public-ssh" in str(failure.value) and "[mandatory]" in str(failure.value)
    assert sim.http("GET", f"{PATH}/global/firewalls/t-policy-fw")[0] == 404


def test_a_provider_error_mid_update_keeps_what_was_created_for_destroy(sim, tmp_path, pulumi_server):
    project = project_for(sim, tmp_path, "t-fail", pulumi_server)
    project.declare(machine_type="n1-nosuchtype-2")
    stack = project.stack("fail")
    with pytest.raises(auto.CommandError) as failure:
        stack.up()
    assert "Error creating instance: googleapi: Error 400" in str(failure.value)
    assert sim.http("GET", f"{PATH}/global/networks/t-fail-vpc")[0] == 200
    stack.destroy()
    assert sim.http("GET", f"{PATH}/global/networks/t-fail-vpc")[0] == 404
    assert sim.http("GET", f"{PATH}/regions/us-central1/subnetworks/t-fail-subnet")[0] == 404
