"""Cloud Storage buckets in the simulator, through google-cloud-storage: global names that stay
taken, GCS's own 409s, labels, lifecycle, uniform access, IAM."""

from __future__ import annotations

import pytest
from google.api_core.exceptions import BadRequest, Conflict, NotFound
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401

BUCKET = f"{PROJECT}-stack-trainctl"


def client(s, project=PROJECT):
    return storage.Client(project=project, credentials=AnonymousCredentials(),
                          client_options={"api_endpoint": s.url})


def test_recreating_your_own_bucket_is_409_you_already_own_it(sim):
    gcs = client(sim)
    gcs.create_bucket(BUCKET, location="us-central1")
    with pytest.raises(Conflict) as caught:
        gcs.create_bucket(BUCKET, location="us-central1")
    assert caught.value.errors[0] == {
        "message": "Your previous request to create the named bucket succeeded and you already own it.",
        "domain": "global", "reason": "conflict"}


def test_another_projects_bucket_name_is_not_available(sim):
    client(sim).create_bucket(BUCKET)
    other = sim.create_project(project="other-project")
    with pytest.raises(Conflict) as caught:
        client(sim, other).create_bucket(BUCKET)
    assert caught.value.errors[0]["message"].startswith(
        "The requested bucket name is not available. The bucket namespace is shared by all users of the system.")


def test_a_bucket_holding_objects_is_not_deleted_and_an_empty_one_is(sim):
    bucket = client(sim).create_bucket(BUCKET)
    bucket.blob("ckpt/model.pt").upload_from_string(b"weights")
    with pytest.raises(Conflict) as caught:
        bucket.delete()
    assert caught.value.errors[0]["message"] == "The bucket you tried to delete is not empty."
    bucket.blob("ckpt/model.pt").delete()
    bucket.delete()
    with pytest.raises(NotFound):
        client(sim).get_bucket(BUCKET)
    again = client(sim).create_bucket(BUCKET)  # the name is free again, and the bucket empty
    assert list(client(sim).list_blobs(again)) == []


def test_labels_lifecycle_uniform_access_and_location_are_kept(sim):
    gcs = client(sim)
    bucket = gcs.bucket(BUCKET)
    bucket.labels = {"managed-by": "trainctl", "trainctl-retain": "true"}
    bucket.add_lifecycle_delete_rule(age=30)
    bucket.iam_configuration.uniform_bucket_level_access_enabled = True
    bucket.iam_configuration.public_access_prevention = "enforced"
    gcs.create_bucket(bucket, location="us-central1")
    got = gcs.get_bucket(BUCKET)
    assert got.location == "US-CENTRAL1" and got.location_type == "region"
    assert got.labels == {"managed-by": "trainctl", "trainctl-retain": "true"}
    assert [r["condition"] for r in got.lifecycle_rules] == [{"age": 30}]
    assert got.iam_configuration.uniform_bucket_level_access_enabled is True
    assert got.iam_configuration.public_access_prevention == "enforced"
    got.labels = {"managed-by": "trainctl"}  # the client sends trainctl-retain: null
    got.patch()
    assert gcs.get_bucket(BUCKET).labels == {"managed-by": "trainctl"}
    got.lifecycle_rules = []
    got.update()  # PUT: what the body leaves out is gone
    again = gcs.get_bucket(BUCKET)
    assert list(again.lifecycle_rules) == [] and again.labels == {"managed-by": "trainctl"}
    assert int(again.metageneration) == 3


def test_a_bucket_grant_takes_storage_roles_only(sim):
    sim.enable("iam.googleapis.com")
    sim.http("POST", f"/v1/projects/{PROJECT}/serviceAccounts", {"accountId": "nodes-sa"})
    member = f"serviceAccount:nodes-sa@{PROJECT}.iam.gserviceaccount.com"
    bucket = client(sim).create_bucket(BUCKET)
    policy = bucket.get_iam_policy(requested_policy_version=3)
    assert {b["role"] for b in policy.bindings} == {"roles/storage.legacyBucketOwner",
                                                    "roles/storage.legacyBucketReader"}
    policy.bindings.append({"role": "roles/storage.objectAdmin", "members": {member}})
    bucket.set_iam_policy(policy)
    policy = bucket.get_iam_policy()
    assert any(b["role"] == "roles/storage.objectAdmin" and member in b["members"] for b in policy.bindings)
    policy.bindings.append({"role": "roles/artifactregistry.reader", "members": {member}})
    with pytest.raises(BadRequest) as caught:
        bucket.set_iam_policy(policy)
    assert caught.value.errors[0]["message"] == "Role roles/artifactregistry.reader is not supported for this resource."


def test_an_invalid_bucket_name_is_refused_in_gcs_words(sim):
    status, body = sim.http("POST", f"/storage/v1/b?project={PROJECT}", {"name": "My_Bucket"})
    assert status == 400 and body["error"]["message"] == "Invalid bucket name: 'My_Bucket'"
