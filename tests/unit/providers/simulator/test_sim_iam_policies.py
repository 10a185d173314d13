"""IAM policies in the simulator: etag read-modify-write, members IAM checks, deleted accounts."""

from __future__ import annotations

import pytest
from googleapiclient.errors import HttpError

from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401
from tests.fakes.sim_google_api import api_client

EMAIL = f"nodes-sa@{PROJECT}.iam.gserviceaccount.com"


@pytest.fixture
def apis(sim):
    sim.enable("iam.googleapis.com", "cloudresourcemanager.googleapis.com")
    return api_client(sim, "cloudresourcemanager", "v1").projects(), api_client(sim, "iam", "v1").projects()


def _grant(crm, policy, role, member):
    bindings = policy.get("bindings", []) + [{"role": role, "members": [member]}]
    return crm.setIamPolicy(resource=PROJECT, body={"policy": {"etag": policy["etag"], "bindings": bindings},
                                                    "updateMask": "bindings,etag,auditConfigs"}).execute()


def test_a_write_with_a_stale_etag_is_aborted_as_concurrent_change(apis):
    crm, iam = apis
    iam.serviceAccounts().create(name=f"projects/{PROJECT}", body={"accountId": "nodes-sa"}).execute()
    read = crm.getIamPolicy(resource=PROJECT, body={"options": {"requestedPolicyVersion": 3}}).execute()
    _grant(crm, read, "roles/logging.logWriter", f"serviceAccount:{EMAIL}")
    with pytest.raises(HttpError) as caught:
        _grant(crm, read, "roles/monitoring.metricWriter", f"serviceAccount:{EMAIL}")
    assert caught.value.status_code == 409
    assert caught.value.reason.startswith("There were concurrent policy changes.")
    now = crm.getIamPolicy(resource=PROJECT, body={}).execute()
    assert now["bindings"] == [{"role": "roles/logging.logWriter", "members": [f"serviceAccount:{EMAIL}"]}]


def test_a_binding_for_an_account_that_does_not_exist_is_refused(apis):
    crm, _ = apis
    read = crm.getIamPolicy(resource=PROJECT, body={}).execute()
    with pytest.raises(HttpError) as caught:
        _grant(crm, read, "roles/logging.logWriter", f"serviceAccount:{EMAIL}")
    assert caught.value.status_code == 400
    assert caught.value.reason == f"Service account {EMAIL} does not exist."


def test_a_member_without_a_type_prefix_is_refused(apis):
    crm, _ = apis
    read = crm.getIamPolicy(resource=PROJECT, body={}).execute()
    with pytest.raises(HttpError) as caught:
        _grant(crm, read, "roles/viewer", "someone@example.com")
    assert caught.value.reason == 'Policy members must be of the form "<type>:<value>".'


def test_a_deleted_accounts_bindings_stay_under_its_deleted_name(apis):
    crm, iam = apis
    made = iam.serviceAccounts().create(name=f"projects/{PROJECT}", body={"accountId": "nodes-sa"}).execute()
    _grant(crm, crm.getIamPolicy(resource=PROJECT, body={}).execute(), "roles/logging.logWriter",
           f"serviceAccount:{EMAIL}")
    iam.serviceAccounts().delete(name=made["name"]).execute()
    members = crm.getIamPolicy(resource=PROJECT, body={}).execute()["bindings"][0]["members"]
    assert members == [f"deleted:serviceAccount:{EMAIL}?uid={made['uniqueId']}"]


def test_a_workload_identity_member_needs_the_projects_pool(apis):
    _, iam = apis
    made = iam.serviceAccounts().create(name=f"projects/{PROJECT}", body={"accountId": "nodes-sa"}).execute()
    policy = iam.serviceAccounts().getIamPolicy(resource=made["name"]).execute()
    member = f"serviceAccount:{PROJECT}.svc.id.goog[trainctl/trainctl]"
    with pytest.raises(HttpError) as caught:
        iam.serviceAccounts().setIamPolicy(resource=made["name"], body={"policy": {
            "etag": policy["etag"], "bindings": [{"role": "roles/iam.workloadIdentityUser", "members": [member]}]}}).execute()
    assert caught.value.status_code == 400
    assert caught.value.reason.startswith(f"Identity Pool does not exist ({PROJECT}.svc.id.goog).")


def test_a_custom_role_must_exist_and_not_be_deleted_to_be_granted(apis):
    crm, iam = apis
    iam.serviceAccounts().create(name=f"projects/{PROJECT}", body={"accountId": "nodes-sa"}).execute()
    role = f"projects/{PROJECT}/roles/reaper"
    with pytest.raises(HttpError) as caught:
        _grant(crm, crm.getIamPolicy(resource=PROJECT, body={}).execute(), role, f"serviceAccount:{EMAIL}")
    assert caught.value.reason == f"Role {role} is not supported for this resource."
    iam.roles().create(parent=f"projects/{PROJECT}", body={
        "roleId": "reaper", "role": {"title": "r", "includedPermissions": ["compute.instances.list"]}}).execute()
    granted = _grant(crm, crm.getIamPolicy(resource=PROJECT, body={}).execute(), role, f"serviceAccount:{EMAIL}")
    assert granted["bindings"][0]["role"] == role
