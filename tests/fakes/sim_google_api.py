"""Google's discovery-based API client (google-api-python-client), pointed at a simulator.

The APIs without a google-cloud-* library installed here (IAM, Resource Manager, Artifact
Registry, Cloud Functions, Cloud Run, Cloud Scheduler) are called through it: it builds every
request from the same discovery documents the Go client the Pulumi provider uses is generated
from, and raises googleapiclient.errors.HttpError with the error body parsed.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.sim_fixtures import RunningSim


def api_client(sim: RunningSim, name: str, version: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from googleapiclient.discovery import build

    return build(name, version, credentials=AnonymousCredentials(), static_discovery=True,
                 client_options={"api_endpoint": sim.url}, cache_discovery=False)
