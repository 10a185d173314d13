"""Service Usage in the simulator: a project's APIs are off until enabled, as GCP answers."""

from __future__ import annotations

import time

from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401


def test_a_disabled_api_answers_403_service_disabled_naming_the_service(sim):
    status, body = sim.http("GET", f"/v2/projects/{PROJECT}/locations/-/nodes")
    assert status == 403
    error = body["error"]
    assert error["status"] == "PERMISSION_DENIED"
    info = next(d for d in error["details"] if d["@type"].endswith("ErrorInfo"))
    assert info["reason"] == "SERVICE_DISABLED"
    assert info["metadata"]["service"] == "tpu.googleapis.com"
    assert "Cloud TPU API has not been used in project" in error["message"]


def test_enabling_is_an_operation_after_which_the_api_answers(make_sim):
    s = make_sim(delays={"service_enable": 0.05})
    status, op = s.http("POST", f"/v1/projects/{PROJECT}/services/tpu.googleapis.com:enable")
    assert status == 200 and op["done"] is False and op["name"].startswith("operations/")
    time.sleep(0.1)
    status, done = s.http("GET", "/v1/" + op["name"])
    assert done["done"] is True and done["response"]["service"]["state"] == "ENABLED"
    status, _ = s.http("GET", f"/v2/projects/{PROJECT}/locations/-/nodes")
    assert status != 403


def test_an_unknown_body_field_is_refused_as_googles_front_end_does(sim):
    status, body = sim.http("POST", f"/v1/projects/{PROJECT}/services:batchEnable",
                            {"serviceIds": ["tpu.googleapis.com"], "servicesIds": []})
    assert status == 400
    assert 'Unknown name "servicesIds"' in body["error"]["message"]


def test_an_unknown_query_parameter_is_refused(sim):
    status, body = sim.http("GET", f"/v1/projects/{PROJECT}/services?filer=state:ENABLED")
    assert status == 400 and "filer" in body["error"]["message"]


def test_a_project_that_does_not_exist_is_refused(sim):
    status, body = sim.http("GET", "/v1/projects/no-such-project/services")
    assert status == 403 and "no-such-project" in body["error"]["message"]


def test_a_fresh_project_has_only_the_default_services(make_sim):
    s = make_sim(template="fresh")
    status, body = s.http("GET", f"/v1/projects/{PROJECT}/services?filter=state:ENABLED")
    enabled = {x["config"]["name"] for x in body["services"]}
    assert "serviceusage.googleapis.com" in enabled and "storage.googleapis.com" in enabled
    assert "compute.googleapis.com" not in enabled and "cloudresourcemanager.googleapis.com" not in enabled
