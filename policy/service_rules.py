"""The constraints on the project services a stack uses: enabled APIs stay enabled when it goes,
2nd-gen Cloud Functions are invoked through Cloud Run, and Artifact Registry repositories are
named by its rules and never public."""

from __future__ import annotations

import re
from typing import Iterator

from policy.declared import AR_IAM, FUNCTION_V2_IAM, T_AR_REPOSITORY, T_SERVICE, Resource, as_list


def function_invoker_role(r: Resource) -> Iterator[str]:
    if r.type in FUNCTION_V2_IAM and r.props.get("role") == "roles/cloudfunctions.invoker":
        yield (f"{r.name!r} grants roles/cloudfunctions.invoker on a 2nd-gen function, which is "
               "invoked through its Cloud Run service: grant roles/run.invoker on that service "
               "(gcp.cloudrunv2.ServiceIamMember with the function's service_config.service)")


def service_not_disabled_on_destroy(r: Resource) -> Iterator[str]:
    if r.type == T_SERVICE and r.props.get("disableOnDestroy") is not False:
        yield (f"API {r.props.get('service', r.name)!r} would be disabled when the stack is "
               "destroyed, breaking everything else in the project that uses it: set "
               "disable_on_destroy=False")


AR_REPOSITORY_ID = re.compile(r"^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$")


def registry_repository_id(r: Resource) -> Iterator[str]:
    if r.type == T_AR_REPOSITORY:
        rid = str(r.props.get("repositoryId", ""))
        if not AR_REPOSITORY_ID.match(rid):
            yield (f"repository id {rid!r}: lowercase letters, digits and hyphens, a letter first, "
                   "a letter or digit last, at most 63 characters")


def registry_not_public(r: Resource) -> Iterator[str]:
    if r.type in AR_IAM:
        members = [r.props.get("member")] + list(as_list(r.props.get("members")))
        public = [m for m in members if m in ("allUsers", "allAuthenticatedUsers")]
        if public:
            yield (f"{r.name!r} grants {r.props.get('role')} on the image repository to {public[0]}: "
                   "images hold the training code; grant the cluster's service account only")
