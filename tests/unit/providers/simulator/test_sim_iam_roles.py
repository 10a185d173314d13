"""IAM custom roles in the simulator: permission checks, soft delete and undelete."""

from __future__ import annotations

import pytest
from googleapiclient.errors import HttpError

from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401
from tests.fakes.sim_google_api import api_client

REAPER = ["compute.instances.list", "compute.instances.get", "compute.instances.delete", "compute.disks.delete",
          "tpu.nodes.list", "tpu.nodes.delete", "tpu.queuedResources.delete", "container.clusters.delete"]


@pytest.fixture
def roles(sim):
    sim.enable("iam.googleapis.com")
    return api_client(sim, "iam", "v1").projects().roles()


def _create(roles, permissions, role_id="reaper"):
    return roles.create(parent=f"projects/{PROJECT}", body={
        "roleId": role_id, "role": {"title": "reaper", "includedPermissions": permissions}}).execute()


def test_the_permissions_a_reaper_needs_make_a_role(roles):
    role = _create(roles, REAPER)
    assert role["name"] == f"projects/{PROJECT}/roles/reaper" and role["stage"] == "ALPHA"
    assert roles.get(name=role["name"]).execute()["includedPermissions"] == REAPER


def test_a_permission_compute_does_not_have_is_not_valid(roles):
    with pytest.raises(HttpError) as caught:
        _create(roles, ["compute.instances.list", "compute.vms.delete"])
    assert caught.value.status_code == 400
    assert caught.value.reason == "Permission compute.vms.delete is not valid."


def test_a_deleted_role_stays_readable_and_taken_until_undeleted(roles):
    role = _create(roles, REAPER)
    assert roles.delete(name=role["name"]).execute()["deleted"] is True
    assert roles.get(name=role["name"]).execute()["deleted"] is True
    with pytest.raises(HttpError) as caught:
        _create(roles, REAPER)
    assert caught.value.status_code == 409
    assert "deleted" not in roles.undelete(name=role["name"], body={}).execute()
    patched = roles.patch(name=role["name"], body={"includedPermissions": REAPER[:2]}).execute()
    assert patched["includedPermissions"] == REAPER[:2]


def test_a_role_body_naming_the_role_is_refused(roles):
    with pytest.raises(HttpError) as caught:
        roles.create(parent=f"projects/{PROJECT}", body={"roleId": "reaper", "role": {"name": "roles/x"}}).execute()
    assert caught.value.reason == "Must not specify role.name."
