"""What a Cloud Functions build's service account may do, judged from the world's IAM policies.

The build writes logs, reads the function's source object and pushes its image; each takes a
permission that a role granted on the project (or, for the source, on its bucket) carries.
Roles are matched by name against the predefined roles known to carry the permission
(https://cloud.google.com/iam/docs/understanding-roles), and custom roles by their permissions.
See cloudfunctions.py for the rule and the messages' sources.
"""

from __future__ import annotations

from typing import Any

from gcpsim.apis import iam_policy
from gcpsim.state import World

BASIC = {"roles/owner", "roles/editor"}
BUILDER = "roles/cloudbuild.builds.builder"  # the Cloud Build Service Account role
LOG_ROLES = BASIC | {BUILDER, "roles/logging.logWriter", "roles/logging.admin"}
READ_ROLES = BASIC | {BUILDER, "roles/viewer", "roles/storage.objectViewer", "roles/storage.objectUser",
                      "roles/storage.objectAdmin", "roles/storage.admin", "roles/storage.legacyObjectReader",
                      "roles/storage.legacyObjectOwner"}
PUSH_ROLES = BASIC | {BUILDER, "roles/artifactregistry.writer", "roles/artifactregistry.repoAdmin",
                      "roles/artifactregistry.admin", "roles/artifactregistry.createOnPushWriter"}


def build_account(world: World, project_id: str, build: dict[str, Any]) -> str:
    """The email the build runs as: buildConfig.serviceAccount (a resource name), else the
    project's Compute Engine default service account."""
    given = build.get("serviceAccount")
    if given:
        return given.rsplit("/", 1)[-1]
    project = world.project(project_id)
    assert project is not None
    return f"{project['number']}-compute@developer.gserviceaccount.com"


def _holds(world: World, project_id: str, resource: str, member: str, roles: set[str], permission: str) -> bool:
    for role in iam_policy.roles_of(world, project_id, resource, member):
        if role in roles:
            return True
        custom = iam_policy.CUSTOM_ROLE.match(role)
        if custom and world.project(custom["project"]):
            found = world.collection(custom["project"], "roles").get(custom["id"]) or {}
            if not found.get("deleted") and permission in (found.get("includedPermissions") or []):
                return True
    return False


def _source(build: dict[str, Any]) -> tuple[str, str]:
    storage = (build.get("source") or {}).get("storageSource") or {}
    return storage.get("bucket", ""), storage.get("object", "")


def missing(world: World, project_id: str, build: dict[str, Any], repository: str) -> str | None:
    """The build's failure message, or None when its account may do all it must."""
    email = build_account(world, project_id, build)
    member = f"serviceAccount:{email}"
    project_resource = f"projects/{project_id}"
    exists = iam_policy.account_exists(world, email)
    if not exists or not _holds(world, project_id, project_resource, member, LOG_ROLES, "logging.logEntries.create"):
        return ("Build failed with status: FAILURE. Could not build the function due to a missing permission on the "
                f"build service account. The service account running this build projects/{project_id}/serviceAccounts/"
                f"{email} does not have permission to write logs to Cloud Logging. To fix this, grant the Logs Writer "
                "(roles/logging.logWriter) role to the service account.")
    bucket, obj = _source(build)
    owner = world.names("buckets").get(bucket)
    readable = _holds(world, project_id, project_resource, member, READ_ROLES, "storage.objects.get") or (
        owner is not None and _holds(world, owner, f"b/{bucket}", member, READ_ROLES, "storage.objects.get"))
    if not readable:
        return ("Build failed with status: FAILURE and message: failed to Fetch: failed to download archive "
                f"gs://{bucket}/{obj}: Access to bucket {bucket} denied. You must grant Storage Object Viewer "
                f"permission to {email}. If you are using VPC Service Controls, you must also grant it access to "
                "your service perimeter.")
    if not _holds(world, project_id, project_resource, member, PUSH_ROLES,
                  "artifactregistry.repositories.uploadArtifacts"):
        return ('Build failed with status: FAILURE and message: denied: Permission '
                f'"artifactregistry.repositories.uploadArtifacts" denied on resource "{repository}" (or it may not exist)')
    return None
