"""IAM: google_service_account and google_project_iam_custom_role (services/resourcemanager), and
the *_iam_member resources (tpgiamresource/resource_iam_member.go with each resource's updater).

A service account is created with serviceAccounts.create, read with get, its display name and
description PATCHed with an update mask, deleted with delete. A custom role is looked up first:
one that exists and is not deleted is refused ("must be imported"); a deleted one (IAM keeps
them for days) is undeleted and patched; otherwise roles.create. Delete is a soft delete.

A member is a read-modify-write of its resource's policy: get the policy (version 3), add the
member to the role's binding (or remove it), set the policy with its etag, retrying when the
etag was stale (409). The provider then re-reads the policy until three reads agree, sleeping a
second or more between them; this stand-in does not wait for propagation. Project members are
batched by the provider across resources; here each member is its own read-modify-write.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from gcpsim.pulumi.gcp.base import GcpResource, failing_as, last
from gcpsim.pulumi.gcp.rest import GoogleApiError
from gcpsim.pulumi.plugins import Diff, ProviderError

IAM_DEFAULT = "https://iam.googleapis.com/v1/"
POLICY_VERSION = 3  # tpgiamresource.IamPolicyVersion
_locks: dict[str, threading.Lock] = {}  # transport_tpg.MutexStore: one writer per policy
_locks_guard = threading.Lock()


class Account(GcpResource):
    token = "gcp:serviceaccount/account:Account"
    endpoint = "iamBetaCustomEndpoint"
    default_url = IAM_DEFAULT
    go_client_version = "v1"
    autoname = "accountId"  # pulumi-gcp: info.AutoName("", 30, "-")
    autoname_max = 30
    force_new = frozenset({"accountId", "project"})

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        project = self.project(inputs)
        body = {"accountId": inputs["accountId"], "serviceAccount": {
            "displayName": inputs.get("displayName", ""), "description": inputs.get("description", "")}}
        try:
            created = self.rest.call("POST", self.url(f"projects/{project}/serviceAccounts"), body)
        except GoogleApiError as exc:
            if exc.code == 409 and inputs.get("createIgnoreAlreadyExists"):
                email = f"{inputs['accountId']}@{project}.iam.gserviceaccount.com"
                created = {"name": f"projects/{project}/serviceAccounts/{email}"}
            else:
                raise ProviderError(f"Error creating service account: {exc}") from None
        found = self.read(created["name"], inputs, inputs)
        return created["name"], found or inputs

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        sa = self.fetch(self.url(id_), f"Service Account {id_!r}")
        if sa is None:
            return None
        return {**inputs, "id": id_, "name": sa["name"], "email": sa.get("email"), "uniqueId": sa.get("uniqueId"),
                "project": sa.get("projectId"), "accountId": str(sa.get("email", "")).split("@")[0],
                "displayName": sa.get("displayName", ""), "description": sa.get("description", ""),
                "disabled": bool(sa.get("disabled")), "member": f"serviceAccount:{sa.get('email')}"}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        mask = [f for f, key in (("description", "description"), ("display_name", "displayName"))
                if key in diff.changed]
        if "disabled" in diff.changed:
            verb = "disable" if news.get("disabled") else "enable"
            self.rest.call("POST", self.url(f"{id_}:{verb}"), {})
        if mask:
            with failing_as(f"Error updating service account {id_!r}"):
                self.rest.call("PATCH", self.url(id_), {"updateMask": ",".join(mask), "serviceAccount": {
                    "displayName": news.get("displayName", ""), "description": news.get("description", "")}})
        return self.read(id_, news, state) or state

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        self.delete_request(self.url(id_), "service account")


class CustomRole(GcpResource):
    token = "gcp:projects/iAMCustomRole:IAMCustomRole"
    endpoint = "iamBetaCustomEndpoint"
    default_url = IAM_DEFAULT
    go_client_version = "v1"
    autoname = None
    force_new = frozenset({"roleId", "project"})

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        role_id = f"projects/{self.project(inputs)}/roles/{inputs['roleId']}"
        try:
            existing = self.rest.get(self.url(role_id))
        except GoogleApiError as exc:
            if exc.code != 404:
                raise ProviderError(f"Unable to verify whether custom project role {role_id} already exists "
                                    f"and must be undeleted: {exc}") from None
            existing = None
        if existing is not None and not existing.get("deleted"):
            raise ProviderError(f"Custom project role {role_id} already exists and must be imported")
        if existing is not None:
            self.update(role_id, {}, inputs, Diff())
        else:
            with failing_as(f"Error creating the custom project role {role_id}"):
                self.rest.call("POST", self.url(f"projects/{self.project(inputs)}/roles"),
                               {"roleId": inputs["roleId"], "role": self._role(inputs)})
        return role_id, self.read(role_id, inputs, inputs) or inputs

    @staticmethod
    def _role(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"title": inputs.get("title", ""), "description": inputs.get("description", ""),
                "stage": inputs.get("stage") or "GA", "includedPermissions": sorted(inputs.get("permissions") or [])}

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        role = self.fetch(self.url(id_), id_)
        if role is None:
            return None
        return {**inputs, "id": id_, "name": role["name"], "roleId": last(role["name"]), "project": id_.split("/")[1],
                "title": role.get("title", ""), "description": role.get("description", ""),
                "permissions": sorted(role.get("includedPermissions") or []), "stage": role.get("stage", "GA"),
                "deleted": bool(role.get("deleted"))}

    def suppress(self, path: str, new: Any, old: Any) -> bool:
        return path == "permissions" and sorted(new or []) == sorted(old or [])  # a set in the schema

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        current = self.rest.get(self.url(id_))
        if current.get("deleted"):
            with failing_as(f"Error undeleting the custom project role {news.get('title', '')}"):
                self.rest.call("POST", self.url(f"{id_}:undelete"), {})
        with failing_as(f"Error updating the custom project role {news.get('title', '')}"):
            self.rest.call("PATCH", self.url(id_), self._role(news),
                           {"updateMask": "description,includedPermissions,stage,title"})
        return self.read(id_, news, state) or state

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        with failing_as(f"Error deleting the custom project role {state.get('title', '')}"):
            self.rest.call("DELETE", self.url(id_))


class IamMember(GcpResource):
    """One member of one role on one resource's policy."""

    autoname: ClassVar[str | None] = None
    force_new = frozenset({"role", "member", "condition", "project"})
    policy_methods: ClassVar[tuple[str, str]] = ("GET", "POST")  # getIamPolicy, setIamPolicy verbs

    def resource_id(self, inputs: dict[str, Any]) -> str:
        raise NotImplementedError

    def get_policy(self, resource: str) -> dict[str, Any]:
        return self.rest.call("GET", self.url(f"{resource}:getIamPolicy"),
                              query={"options.requestedPolicyVersion": str(POLICY_VERSION)})

    def set_policy(self, resource: str, policy: dict[str, Any]) -> None:
        self.rest.call("POST", self.url(f"{resource}:setIamPolicy"), {"policy": policy})

    def describe(self, resource: str) -> str:
        return resource

    def _modify(self, resource: str, change: Any) -> None:
        with _locks_guard:
            lock = _locks.setdefault(self.url(resource), threading.Lock())
        with lock:
            for _ in range(10):
                with failing_as(f"Error retrieving IAM policy for {self.describe(resource)}"):
                    policy = self.get_policy(resource)
                policy["bindings"] = change(policy.get("bindings") or [])
                policy["version"] = POLICY_VERSION
                try:
                    self.set_policy(resource, policy)
                    return
                except GoogleApiError as exc:
                    if exc.code != 409:
                        raise ProviderError(f"Error setting IAM policy for {self.describe(resource)}: {exc}") from None
            raise ProviderError(f"Error setting IAM policy for {self.describe(resource)}: the policy kept changing")

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        resource, role, member = self.resource_id(inputs), inputs["role"], inputs["member"]

        def add(bindings: list[dict[str, Any]]) -> list[dict[str, Any]]:
            for binding in bindings:
                if binding.get("role") == role and not binding.get("condition"):
                    if member.lower() not in [m.lower() for m in binding.get("members") or []]:
                        binding["members"] = [*binding.get("members", []), member]
                    return bindings
            return [*bindings, {"role": role, "members": [member]}]

        self._modify(resource, add)
        id_ = f"{resource}/{role}/{member}"
        return id_, self.read(id_, inputs, inputs) or {**inputs, "id": id_}

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        values = {**state, **inputs}
        resource, role, member = self.resource_id(values), values["role"], values["member"]
        with failing_as(f"Error when reading or editing Resource {self.describe(resource)!r} with IAM Member: "
                        f"Role {role!r} Member {member!r}"):
            try:
                policy = self.get_policy(resource)
            except GoogleApiError as exc:
                if exc.code == 404:
                    return None
                raise
        binding = next((b for b in policy.get("bindings") or []
                        if b.get("role") == role and not b.get("condition")), None)
        found = next((m for m in (binding or {}).get("members") or [] if m.lower() == member.lower()), None)
        if found is None:
            return None
        return {**values, "id": id_, "member": found, "role": role, "etag": policy.get("etag")}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        return self.read(id_, news, state) or state

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        resource, role, member = self.resource_id(state), state["role"], state["member"]

        def remove(bindings: list[dict[str, Any]]) -> list[dict[str, Any]]:
            out = []
            for binding in bindings:
                if binding.get("role") == role and not binding.get("condition"):
                    binding = {**binding, "members": [m for m in binding.get("members") or []
                                                      if m.lower() != member.lower()]}
                if binding.get("members"):
                    out.append(binding)
            return out

        try:
            self._modify(resource, remove)
        except ProviderError as exc:
            if "googleapi: Error 404" not in str(exc):
                raise


class BucketIamMember(IamMember):
    token = "gcp:storage/bucketIAMMember:BucketIAMMember"
    endpoint = "storageCustomEndpoint"
    default_url = "https://storage.googleapis.com/storage/v1/"
    force_new = IamMember.force_new | {"bucket"}

    def suppress(self, path: str, new: Any, old: Any) -> bool:
        return path == "bucket" and last(new) == last(old)  # state holds "b/<bucket>"

    def resource_id(self, inputs: dict[str, Any]) -> str:
        return f"b/{last(inputs['bucket'])}"

    def get_policy(self, resource: str) -> dict[str, Any]:
        return self.rest.get(self.url(f"{resource}/iam"), {"optionsRequestedPolicyVersion": str(POLICY_VERSION)})

    def set_policy(self, resource: str, policy: dict[str, Any]) -> None:
        self.rest.call("PUT", self.url(f"{resource}/iam"), policy)

    def describe(self, resource: str) -> str:
        return f"storage bucket {resource!r}"


class ProjectIamMember(IamMember):
    token = "gcp:projects/iAMMember:IAMMember"
    endpoint = "resourceManagerCustomEndpoint"
    default_url = "https://cloudresourcemanager.googleapis.com/v1/"
    go_client_version = "v1"
    always_delete_before_replace = True  # pulumi-gcp's ResourceInfo

    def resource_id(self, inputs: dict[str, Any]) -> str:
        return f"projects/{self.project(inputs)}"

    def get_policy(self, resource: str) -> dict[str, Any]:
        return self.rest.call("POST", self.url(f"{resource}:getIamPolicy"),
                              {"options": {"requestedPolicyVersion": POLICY_VERSION}})

    def describe(self, resource: str) -> str:
        return f"project {last(resource)!r}"


class ServiceAccountIamMember(IamMember):
    token = "gcp:serviceaccount/iAMMember:IAMMember"
    endpoint = "iamBetaCustomEndpoint"
    default_url = IAM_DEFAULT
    go_client_version = "v1"
    force_new = IamMember.force_new | {"serviceAccountId"}

    def resource_id(self, inputs: dict[str, Any]) -> str:
        return str(inputs["serviceAccountId"])

    def get_policy(self, resource: str) -> dict[str, Any]:
        return self.rest.call("POST", self.url(f"{resource}:getIamPolicy"),
                              query={"options.requestedPolicyVersion": str(POLICY_VERSION)})


class RepositoryIamMember(IamMember):
    token = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
    endpoint = "artifactRegistryCustomEndpoint"
    default_url = "https://artifactregistry.googleapis.com/v1/"
    force_new = IamMember.force_new | {"repository", "location"}

    def resource_id(self, inputs: dict[str, Any]) -> str:
        return (f"projects/{self.project(inputs)}/locations/{self.region(inputs, 'location')}"
                f"/repositories/{last(inputs['repository'])}")

    def get_policy(self, resource: str) -> dict[str, Any]:
        return self.rest.get(self.url(f"{resource}:getIamPolicy"))


class RunServiceIamMember(IamMember):
    token = "gcp:cloudrunv2/serviceIamMember:ServiceIamMember"
    endpoint = "cloudRunV2CustomEndpoint"
    default_url = "https://run.googleapis.com/v2/"
    force_new = IamMember.force_new | {"name", "location"}
    autoname = "name"  # a string input called name: auto-named by SetAutonaming

    def resource_id(self, inputs: dict[str, Any]) -> str:
        return (f"projects/{self.project(inputs)}/locations/{self.region(inputs, 'location')}"
                f"/services/{last(inputs['name'])}")

    def get_policy(self, resource: str) -> dict[str, Any]:
        return self.rest.get(self.url(f"{resource}:getIamPolicy"))


TYPES = (Account, CustomRole, BucketIamMember, ProjectIamMember, ServiceAccountIamMember,
         RepositoryIamMember, RunServiceIamMember)
