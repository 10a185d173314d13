"""A named stack's bucket outlives `down` (its checkpoints): the next `up` adopts it.

GCS keeps the bucket and its name, so creating it again is a 409 ("you already own it"). When
the stack's Pulumi state holds no bucket but GCS has one of the stack's name carrying the stack's
labels, `up` imports it (infra/providers/gcp/program/storage.py `adoption`). A bucket of that name that is not the
stack's is never taken over: the name is refused with the way out.
"""

from __future__ import annotations

import os
from typing import Any

from infra.errors import ConfigError
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from infra.providers.gcp.program.storage import bucket_name, kept_on_down
from infra.spec.cluster import ClusterSpec

BUCKET_TYPE = "gcp:storage/bucket:Bucket"


def _storage_client(project: str | None) -> Any:
    from google.cloud import storage

    endpoint = os.environ.get(API_ENDPOINT_ENV)
    if not endpoint:
        return storage.Client(project=project)
    from google.auth.credentials import AnonymousCredentials

    return storage.Client(project=project, credentials=AnonymousCredentials(),
                          client_options={"api_endpoint": endpoint})


def in_state(pulumi_stack: Any) -> bool:
    resources = pulumi_stack.export_stack().deployment.get("resources") or []
    return any(r.get("type") == BUCKET_TYPE for r in resources)


def bucket_to_adopt(spec: ClusterSpec, pulumi_stack: Any) -> str | None:
    """The kept bucket's name where `up` must adopt it, else None."""
    if not kept_on_down(spec) or in_state(pulumi_stack):
        return None
    name = bucket_name(spec)
    bucket = _storage_client(spec.project).lookup_bucket(name)
    if bucket is None:
        return None
    labels = bucket.labels or {}
    if labels.get("managed-by") != "trainctl" or labels.get("trainctl-stack") != spec.name:
        raise ConfigError(
            f"bucket gs://{name} exists but is not stack {spec.name}'s (labels {labels}); "
            f"name another one with trainctl:bucket.name in stacks/Pulumi.{spec.name}.yaml")
    return name
