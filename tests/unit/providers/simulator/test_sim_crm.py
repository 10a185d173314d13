"""Cloud Resource Manager in the simulator: the project as v1 and v3 show it."""

from __future__ import annotations

from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401
from tests.fakes.sim_google_api import api_client


def test_v1_and_v3_show_the_same_project_in_their_own_shapes(sim):
    sim.enable("cloudresourcemanager.googleapis.com")
    v1 = api_client(sim, "cloudresourcemanager", "v1").projects().get(projectId=PROJECT).execute()
    v3 = api_client(sim, "cloudresourcemanager", "v3").projects().get(name=f"projects/{PROJECT}").execute()
    assert v1["projectId"] == v3["projectId"] == PROJECT
    assert v1["lifecycleState"] == v3["state"] == "ACTIVE"
    assert v3["name"] == f"projects/{v1['projectNumber']}"


def test_reading_the_project_needs_the_resource_manager_api_on(make_sim):
    """What the provider's projects.Service does after every enablement (defect 3)."""
    s = make_sim(template="fresh")
    status, body = s.http("GET", f"/v1/projects/{PROJECT}")
    assert status == 403
    assert body["error"]["details"][0]["metadata"]["service"] == "cloudresourcemanager.googleapis.com"
