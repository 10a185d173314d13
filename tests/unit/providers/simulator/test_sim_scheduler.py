"""Cloud Scheduler in the simulator: jobs with an OIDC HTTP target, Scheduler's schedule check."""

from __future__ import annotations

import pytest
from googleapiclient.errors import HttpError

from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401
from tests.fakes.sim_google_api import api_client

PARENT = f"projects/{PROJECT}/locations/us-central1"


@pytest.fixture
def jobs(sim):
    sim.enable("cloudscheduler.googleapis.com")
    return api_client(sim, "cloudscheduler", "v1").projects().locations().jobs()


def _job(schedule="*/15 * * * *", zone="Etc/UTC"):
    target = {"uri": "https://stack-reaper-1.us-central1.run.app", "httpMethod": "POST",
              "oidcToken": {"serviceAccountEmail": f"stack-reaper@{PROJECT}.iam.gserviceaccount.com",
                            "audience": "https://stack-reaper-1.us-central1.run.app"}}
    return {"name": f"{PARENT}/jobs/stack-reaper", "schedule": schedule, "timeZone": zone, "httpTarget": target}


def test_a_job_is_enabled_paused_resumed_and_deleted(jobs):
    made = jobs.create(parent=PARENT, body=_job()).execute()
    assert made["state"] == "ENABLED" and made["httpTarget"]["oidcToken"]["audience"].endswith("run.app")
    assert jobs.pause(name=made["name"], body={}).execute()["state"] == "PAUSED"
    assert jobs.resume(name=made["name"], body={}).execute()["state"] == "ENABLED"
    patched = jobs.patch(name=made["name"], updateMask="schedule", body={"schedule": "0 * * * *"}).execute()
    assert patched["schedule"] == "0 * * * *"
    jobs.delete(name=made["name"]).execute()
    with pytest.raises(HttpError) as caught:
        jobs.get(name=made["name"]).execute()
    assert caught.value.status_code == 404


@pytest.mark.parametrize("schedule,zone", [("every 15 minutes", "Etc/UTC"), ("*/15 * * *", "Etc/UTC"),
                                           ("61 * * * *", "Etc/UTC"), ("*/15 * * * *", "Mars/Olympus")])
def test_a_schedule_or_zone_scheduler_cannot_read_is_refused(jobs, schedule, zone):
    with pytest.raises(HttpError) as caught:
        jobs.create(parent=PARENT, body=_job(schedule, zone)).execute()
    assert caught.value.status_code == 400 and caught.value.reason == "Schedule or time zone is invalid."
