"""Cloud Functions v2 in the simulator: a function builds as its build service account, which a
new project grants nothing (issue 30's defect 4); once built it is a Cloud Run service that takes
run.invoker grants; its image repository outlives it."""

from __future__ import annotations

import pytest
from googleapiclient.errors import HttpError

from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401
from tests.fakes.sim_google_api import api_client

REGION = "us-central1"
PARENT = f"projects/{PROJECT}/locations/{REGION}"
BUCKET = f"{PROJECT}-stack-trainctl"
SERVICES = ("cloudfunctions.googleapis.com", "run.googleapis.com", "cloudbuild.googleapis.com",
            "artifactregistry.googleapis.com", "iam.googleapis.com", "cloudresourcemanager.googleapis.com")


@pytest.fixture
def project(make_sim):
    s = make_sim(delays={"function_build": 0.0, "function_update": 0.0, "function_delete": 0.0})
    s.enable(*SERVICES)
    s.http("POST", f"/storage/v1/b?project={PROJECT}", {"name": BUCKET})
    return s


def _function(build_account=None):
    build = {"runtime": "python311", "entryPoint": "reap",
             "source": {"storageSource": {"bucket": BUCKET, "object": "trainctl-reaper/source-1.zip"}}}
    if build_account:
        build["serviceAccount"] = f"projects/{PROJECT}/serviceAccounts/{build_account}"
    return {"buildConfig": build, "serviceConfig": {"maxInstanceCount": 1, "ingressSettings": "ALLOW_INTERNAL_ONLY"}}


def _create(s, body):
    functions = api_client(s, "cloudfunctions", "v2").projects().locations()
    op = functions.functions().create(parent=PARENT, functionId="stack-reaper", body=body).execute()
    return functions, functions.operations().get(name=op["name"]).execute()


def _grant(s, resource_path, role, member, read="POST"):
    """Read-modify-write of a policy: `...:getIamPolicy` (POST or GET) and `:setIamPolicy`, or a
    bucket's `/iam` (GET and PUT)."""
    bucket = resource_path.startswith("/storage/")
    get_path, set_path = (f"{resource_path}/iam",) * 2 if bucket else (f"{resource_path}:getIamPolicy",
                                                                         f"{resource_path}:setIamPolicy")
    status, policy = s.http("GET" if bucket else read, get_path, None if bucket or read == "GET" else {})
    new = {"etag": policy["etag"], "bindings": policy.get("bindings", []) + [{"role": role, "members": [member]}]}
    status, answer = s.http("PUT" if bucket else "POST", set_path, new if bucket else {"policy": new})
    assert status == 200, answer


def test_a_function_without_a_build_account_fails_its_build_in_a_new_project(project):
    """The default build account (Compute's default account) holds nothing in a new project."""
    functions, op = _create(project, _function())
    assert op["done"] is True and op["error"]["code"] == 13
    number = project.http("GET", f"/trainctl-sim/v1/projects/{PROJECT}")[1]["number"]
    assert (f"The service account running this build projects/{PROJECT}/serviceAccounts/{number}-compute@"
            "developer.gserviceaccount.com does not have permission to write logs to Cloud Logging.") in op["error"]["message"]
    got = functions.functions().get(name=f"{PARENT}/functions/stack-reaper").execute()
    assert got["state"] == "FAILED"


def test_a_build_account_needs_the_source_bucket_too(project):
    email = f"stack-build@{PROJECT}.iam.gserviceaccount.com"
    project.http("POST", f"/v1/projects/{PROJECT}/serviceAccounts", {"accountId": "stack-build"})
    for role in ("roles/logging.logWriter", "roles/artifactregistry.writer"):
        _grant(project, f"/v1/projects/{PROJECT}", role, f"serviceAccount:{email}")
    _, op = _create(project, _function(email))
    assert op["error"]["message"].startswith(
        f"Build failed with status: FAILURE and message: failed to Fetch: failed to download archive "
        f"gs://{BUCKET}/trainctl-reaper/source-1.zip: Access to bucket {BUCKET} denied. You must grant "
        f"Storage Object Viewer permission to {email}.")


def test_a_build_account_with_its_roles_builds_a_function_served_by_cloud_run(project):
    email = f"stack-build@{PROJECT}.iam.gserviceaccount.com"
    project.http("POST", f"/v1/projects/{PROJECT}/serviceAccounts", {"accountId": "stack-build"})
    for role in ("roles/logging.logWriter", "roles/artifactregistry.writer"):
        _grant(project, f"/v1/projects/{PROJECT}", role, f"serviceAccount:{email}")
    _grant(project, f"/storage/v1/b/{BUCKET}", "roles/storage.objectViewer", f"serviceAccount:{email}")
    functions, op = _create(project, _function(email))
    assert "error" not in op and op["response"]["state"] == "ACTIVE"
    config = functions.functions().get(name=f"{PARENT}/functions/stack-reaper").execute()["serviceConfig"]
    assert config["service"] == f"{PARENT}/services/stack-reaper" and config["uri"].endswith(f".{REGION}.run.app")
    run = api_client(project, "run", "v2").projects().locations().services()
    assert run.get(name=config["service"]).execute()["ingress"] == "INGRESS_TRAFFIC_INTERNAL_ONLY"
    _grant(project, f"/v2/{config['service']}", "roles/run.invoker", f"serviceAccount:{email}", read="GET")
    registry = api_client(project, "artifactregistry", "v1").projects().locations().repositories()
    functions.functions().delete(name=f"{PARENT}/functions/stack-reaper").execute()
    with pytest.raises(HttpError):
        run.get(name=config["service"]).execute()
    assert registry.get(name=f"{PARENT}/repositories/gcf-artifacts").execute()["format"] == "DOCKER"
