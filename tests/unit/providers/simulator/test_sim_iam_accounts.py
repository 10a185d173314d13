"""IAM service accounts in the simulator, through Google's discovery-based IAM client."""

from __future__ import annotations

import pytest
from googleapiclient.errors import HttpError

from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401
from tests.fakes.sim_google_api import api_client

EMAIL = f"nodes-sa@{PROJECT}.iam.gserviceaccount.com"


@pytest.fixture
def accounts(sim):
    sim.enable("iam.googleapis.com")
    return api_client(sim, "iam", "v1").projects().serviceAccounts()


def test_an_account_id_outside_6_to_30_characters_is_refused_as_iam_words_it(accounts):
    with pytest.raises(HttpError) as caught:
        accounts.create(name=f"projects/{PROJECT}", body={"accountId": "sa"}).execute()
    assert caught.value.status_code == 400
    assert caught.value.reason == 'The account ID "sa" does not have a length between 6 and 30.'


def test_an_account_is_named_by_its_email_and_found_by_its_unique_id(accounts):
    made = accounts.create(name=f"projects/{PROJECT}",
                           body={"accountId": "nodes-sa", "serviceAccount": {"displayName": "nodes"}}).execute()
    assert made["email"] == EMAIL and made["name"] == f"projects/{PROJECT}/serviceAccounts/{EMAIL}"
    by_id = accounts.get(name=f"projects/{PROJECT}/serviceAccounts/{made['uniqueId']}").execute()
    assert by_id["email"] == EMAIL and by_id["displayName"] == "nodes"
    listed = accounts.list(name=f"projects/{PROJECT}").execute()["accounts"]
    assert [a["email"] for a in listed] == [EMAIL]


def test_creating_an_existing_account_is_409_naming_it(accounts):
    accounts.create(name=f"projects/{PROJECT}", body={"accountId": "nodes-sa"}).execute()
    with pytest.raises(HttpError) as caught:
        accounts.create(name=f"projects/{PROJECT}", body={"accountId": "nodes-sa"}).execute()
    assert caught.value.status_code == 409
    assert caught.value.reason == f"Service account nodes-sa already exists within project projects/{PROJECT}."
    assert caught.value.error_details[0]["resourceName"].endswith(EMAIL)


def test_a_deleted_account_is_gone_and_its_id_can_be_used_again(accounts):
    first = accounts.create(name=f"projects/{PROJECT}", body={"accountId": "nodes-sa"}).execute()
    accounts.delete(name=first["name"]).execute()
    with pytest.raises(HttpError) as caught:
        accounts.get(name=first["name"]).execute()
    assert caught.value.status_code == 404
    again = accounts.create(name=f"projects/{PROJECT}", body={"accountId": "nodes-sa"}).execute()
    assert again["uniqueId"] != first["uniqueId"]


def test_patch_changes_only_what_the_mask_names(accounts):
    made = accounts.create(name=f"projects/{PROJECT}",
                           body={"accountId": "nodes-sa", "serviceAccount": {"displayName": "a", "description": "d"}}).execute()
    patched = accounts.patch(name=made["name"], body={"serviceAccount": {"displayName": "b", "description": "x"},
                                                      "updateMask": "display_name"}).execute()
    assert patched["displayName"] == "b" and patched["description"] == "d"
    assert patched["etag"] != made["etag"]


def test_an_api_that_is_off_refuses_account_calls(sim):
    with pytest.raises(HttpError) as caught:
        api_client(sim, "iam", "v1").projects().serviceAccounts().list(name=f"projects/{PROJECT}").execute()
    assert caught.value.status_code == 403
    assert caught.value.error_details[0]["reason"] == "SERVICE_DISABLED"
