"""Cloud Scheduler v1: jobs (create, get, list, patch, delete, pause, resume).

https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs
A job is ENABLED when made (the provider then calls :resume or :pause as the job's `paused` says)
and calls its HTTP target on a unix-cron schedule in a time zone of the tz database; a schedule or
zone it cannot read is refused with Cloud Scheduler's "Schedule or time zone is invalid."
(https://github.com/htsuruo/firebase-extensions/issues/16, a 400 INVALID_ARGUMENT body).
An HTTP target with an OIDC token names the service account it signs as and the audience.
Chosen: jobs never fire (the simulator does not call their targets: nothing in trainctl's tests
waits for a schedule); the 404/409 bodies use the simulator's generic wording; the legacy
App Engine schedule syntax ("every 24 hours") is refused, as the source above saw it refused.
"""

from __future__ import annotations

import re
import zoneinfo
from typing import Any

from gcpsim import operations
from gcpsim.apis import locations
from gcpsim.errors import already_exists, invalid_argument
from gcpsim.routes import Call, handles

JOBS = "scheduler_jobs"
SETTABLE = ("description", "schedule", "timeZone", "httpTarget", "pubsubTarget", "appEngineHttpTarget",
            "retryConfig", "attemptDeadline")
MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
DAYS = "sun mon tue wed thu fri sat".split()
FIELDS: tuple[tuple[int, int, list[str]], ...] = ((0, 59, []), (0, 23, []), (1, 31, []), (1, 12, MONTHS), (0, 7, DAYS))
ITEM = re.compile(r"(?P<range>\*|(?P<a>\w+)(?:-(?P<b>\w+))?)(?:/(?P<step>\d+))?")


def _value(text: str, low: int, high: int, names: list[str]) -> bool:
    if text.lower() in names:
        return True
    return text.isdigit() and low <= int(text) <= high


def valid_schedule(schedule: str, time_zone: str) -> bool:
    """unix-cron's five fields (numbers, ranges, steps, lists, month and day names)."""
    try:
        zoneinfo.ZoneInfo(time_zone or "Etc/UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    fields = schedule.split()
    if len(fields) != 5:
        return False
    for text, (low, high, names) in zip(fields, FIELDS):
        for item in text.split(","):
            m = ITEM.fullmatch(item)
            if m is None or (m["step"] is not None and int(m["step"]) == 0):
                return False
            if m["range"] != "*" and not all(_value(v, low, high, names) for v in (m["a"], m["b"]) if v):
                return False
    return True


def _check(job: dict[str, Any]) -> None:
    if not valid_schedule(job.get("schedule", ""), job.get("timeZone", "")):
        raise invalid_argument("Schedule or time zone is invalid.")


@handles("cloudscheduler.projects.locations.jobs.create")
def create(call: Call) -> Any:
    body = call.body or {}
    name = body.get("name") or ""
    if not re.fullmatch(re.escape(call.params["parent"]) + r"/jobs/[a-zA-Z\d_-]{1,500}", name):
        raise invalid_argument("Request contains an invalid argument.")
    job = {"name": name, **{k: body[k] for k in SETTABLE if k in body}}
    job.setdefault("timeZone", "Etc/UTC")
    _check(job)
    jobs = call.world.collection(call.project_id, JOBS)
    if name in jobs:
        raise already_exists(name)
    job.update(state="ENABLED", userUpdateTime=operations.rfc3339(call.now), attemptDeadline=job.get("attemptDeadline", "180s"))
    jobs[name] = job
    return job


@handles("cloudscheduler.projects.locations.jobs.get")
def get(call: Call) -> Any:
    return locations.find(call, JOBS, call.params["name"])


@handles("cloudscheduler.projects.locations.jobs.list")
def list_(call: Call) -> Any:
    return locations.children(call, JOBS, "jobs")


@handles("cloudscheduler.projects.locations.jobs.patch")
def patch(call: Call) -> Any:
    job = locations.find(call, JOBS, call.params["name"])
    body = call.body or {}
    changed = dict(job)
    for field in locations.masked_fields(call, SETTABLE):
        changed[field] = body.get(field)
    _check(changed)
    job.update(changed, userUpdateTime=operations.rfc3339(call.now))
    return job


def _set_state(call: Call, state: str) -> Any:
    job = locations.find(call, JOBS, call.params["name"])
    job.update(state=state, userUpdateTime=operations.rfc3339(call.now))
    return job


@handles("cloudscheduler.projects.locations.jobs.pause")
def pause(call: Call) -> Any:
    return _set_state(call, "PAUSED")


@handles("cloudscheduler.projects.locations.jobs.resume")
def resume(call: Call) -> Any:
    return _set_state(call, "ENABLED")


@handles("cloudscheduler.projects.locations.jobs.delete")
def delete(call: Call) -> Any:
    job = locations.find(call, JOBS, call.params["name"])
    del call.world.collection(call.project_id, JOBS)[job["name"]]
    return {}
