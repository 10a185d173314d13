"""Artifact Registry in the simulator, through Google's discovery-based client: repositories as
long-running creates and deletes, their IAM policy, GKE and Artifact Registry operations apart."""

from __future__ import annotations

import pytest
from googleapiclient.errors import HttpError

from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401
from tests.fakes.sim_google_api import api_client

PARENT = f"projects/{PROJECT}/locations/us-central1"
NAME = f"{PARENT}/repositories/stack-images"


@pytest.fixture
def registry(make_sim):
    s = make_sim(delays={"repository_create": 60.0, "repository_delete": 0.0})
    s.enable("artifactregistry.googleapis.com", "iam.googleapis.com")
    return s, api_client(s, "artifactregistry", "v1").projects().locations()


def _finish(s):
    """Let every pending operation's time pass (the project's delay of 60 s)."""
    with s.simulator.store.transaction() as world:
        for op in world.operations().values():
            op["done_at"] = min(op["done_at"], 0.0)


def test_a_repository_exists_once_its_create_operation_is_done(registry):
    s, locations = registry
    op = locations.repositories().create(parent=PARENT, repositoryId="stack-images",
                                         body={"format": "DOCKER", "labels": {"managed-by": "trainctl"}}).execute()
    assert op["done"] is False and op["name"].startswith(f"{PARENT}/operations/")
    with pytest.raises(HttpError) as caught:
        locations.repositories().get(name=NAME).execute()
    assert caught.value.status_code == 404
    _finish(s)
    finished = locations.operations().get(name=op["name"]).execute()
    assert finished["done"] is True and finished["response"]["name"] == NAME
    got = locations.repositories().get(name=NAME).execute()
    assert got["format"] == "DOCKER" and got["labels"] == {"managed-by": "trainctl"}
    assert got["registryUri"] == f"us-central1-docker.pkg.dev/{PROJECT}/stack-images"


def test_a_second_create_is_409_and_a_bad_id_is_400(registry):
    s, locations = registry
    locations.repositories().create(parent=PARENT, repositoryId="stack-images", body={"format": "DOCKER"}).execute()
    with pytest.raises(HttpError) as caught:
        locations.repositories().create(parent=PARENT, repositoryId="stack-images", body={"format": "DOCKER"}).execute()
    assert caught.value.status_code == 409
    with pytest.raises(HttpError) as caught:
        locations.repositories().create(parent=PARENT, repositoryId="Stack_Images", body={"format": "DOCKER"}).execute()
    assert caught.value.status_code == 400


def test_a_reader_grant_names_an_existing_account(registry):
    s, locations = registry
    locations.repositories().create(parent=PARENT, repositoryId="stack-images", body={"format": "DOCKER"}).execute()
    _finish(s)
    member = f"serviceAccount:nodes-sa@{PROJECT}.iam.gserviceaccount.com"
    grant = {"policy": {"bindings": [{"role": "roles/artifactregistry.reader", "members": [member]}]}}
    with pytest.raises(HttpError) as caught:
        locations.repositories().setIamPolicy(resource=NAME, body=grant).execute()
    assert caught.value.status_code == 400
    s.http("POST", f"/v1/projects/{PROJECT}/serviceAccounts", {"accountId": "nodes-sa"})
    locations.repositories().setIamPolicy(resource=NAME, body=grant).execute()
    assert locations.repositories().getIamPolicy(resource=NAME).execute()["bindings"][0]["members"] == [member]


def test_a_deleted_repository_is_gone(registry):
    s, locations = registry
    locations.repositories().create(parent=PARENT, repositoryId="stack-images", body={"format": "DOCKER"}).execute()
    _finish(s)
    op = locations.repositories().delete(name=NAME).execute()
    assert locations.operations().get(name=op["name"]).execute()["done"] is True
    with pytest.raises(HttpError) as caught:
        locations.repositories().get(name=NAME).execute()
    assert caught.value.status_code == 404
