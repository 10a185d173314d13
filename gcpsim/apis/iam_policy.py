"""IAM allow policies, shared by every simulated resource that has one.

Projects (Cloud Resource Manager), service accounts, buckets, Artifact Registry repositories,
Cloud Run services: each keeps its policy in the world's `iam_policies` collection of its project,
keyed by the resource's name. What they share is Google's read-modify-write contract
(https://cloud.google.com/iam/docs/policies#etag): setIamPolicy with an etag that is not the
current one is refused with 409 ABORTED, and every accepted write gets a new etag.

A binding's members are checked as IAM checks them where the simulator knows the answer: a
service account of a simulated project must exist, a Workload Identity member needs the
project's pool (which GKE creates with the first cluster that enables it), a custom role must
exist. Predefined roles are not enumerated (the simulator has no list of them): any
`roles/<name>` is taken, except that a bucket takes only Cloud Storage roles and custom roles.
When a service account is deleted its bindings stay, renamed `deleted:serviceAccount:...?uid=`
(https://cloud.google.com/iam/docs/service-accounts-delete-undelete#deleting).
"""

from __future__ import annotations

import base64
import re
from typing import Any, Callable

from gcpsim.errors import ApiError, invalid_argument
from gcpsim.routes import Call, handles
from gcpsim.state import World

COLLECTION = "iam_policies"

# https://github.com/DataBiosphere/leonardo/pull/737 (the body), https://github.com/pulumi/
# pulumi-google-native/issues/862 (the ETag sentence newer answers add).
CONCURRENT = ("There were concurrent policy changes. Please retry the whole read-modify-write "
              "with exponential backoff. The request's ETag '{sent}' did not match the current "
              "policy's ETag '{current}'.")
# https://github.com/terraform-google-modules/terraform-google-kubernetes-engine/issues/916
NO_POOL = ("Identity Pool does not exist ({pool}). Please check that you specified a valid resource "
           "name as returned in the `name` attribute in the configuration API.")
# https://github.com/GoogleCloudPlatform/generative-ai/issues/944
NO_ACCOUNT = "Service account {email} does not exist."
# https://github.com/hashicorp/terraform-provider-google/issues/4965 (the 400 body)
BAD_MEMBER = 'Policy members must be of the form "<type>:<value>".'
# https://github.com/terraform-google-modules/terraform-google-iam/issues/219
UNSUPPORTED_ROLE = "Role {role} is not supported for this resource."

WORKLOAD_MEMBER = re.compile(r"^serviceAccount:(?P<pool>[a-z0-9-]+\.svc\.id\.goog)\[[^/\]]+/[^\]]+\]$")
ACCOUNT_MEMBER = re.compile(r"^serviceAccount:(?P<id>[a-z0-9-]+)@(?P<project>[a-z0-9-]+)\.iam\.gserviceaccount\.com$")
COMPUTE_MEMBER = re.compile(r"^serviceAccount:(?P<number>\d+)-compute@developer\.gserviceaccount\.com$")
CUSTOM_ROLE = re.compile(r"^projects/(?P<project>[^/]+)/roles/(?P<id>[^/]+)$")
MEMBER_KINDS = ("user:", "serviceAccount:", "group:", "domain:", "deleted:", "principal://",
                "principalSet://", "projectOwner:", "projectEditor:", "projectViewer:")


def etag_for(seq: int) -> str:
    """Opaque, as Google's are (base64 of a version stamp)."""
    return base64.b64encode(b"\x07" + seq.to_bytes(7, "big")).decode()


def stored(world: World, project: str, resource: str) -> dict[str, Any]:
    policies = world.collection(project, COLLECTION)
    if resource not in policies:
        policies[resource] = {"bindings": [], "etag": etag_for(world.next_id())}
    return policies[resource]


def render(policy: dict[str, Any]) -> dict[str, Any]:
    """google.iam.v1.Policy: version 3 only where a binding has a condition; no empty lists."""
    bindings = policy["bindings"]
    out: dict[str, Any] = {"version": 3 if any("condition" in b for b in bindings) else 1,
                           "etag": policy["etag"]}
    if bindings:
        out["bindings"] = bindings
    return out


def get(world: World, project: str, resource: str) -> dict[str, Any]:
    return render(stored(world, project, resource))


def set_policy(world: World, project: str, resource: str, sent: dict[str, Any] | None,
               kind: str = "") -> dict[str, Any]:
    """Replace the policy (read-modify-write); `kind` = "bucket" limits the roles it takes."""
    sent = sent or {}
    current = stored(world, project, resource)
    if sent.get("etag") and sent["etag"] != current["etag"]:
        raise ApiError(409, CONCURRENT.format(sent=sent["etag"], current=current["etag"]),
                       status="ABORTED", reason="aborted")
    bindings = _merged(sent.get("bindings") or [])
    for binding in bindings:
        _check_role(world, binding["role"], kind)
        for member in binding["members"]:
            check_member(world, member)
    current.update(bindings=bindings, etag=etag_for(world.next_id()))
    return render(current)


def _merged(bindings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One binding per (role, condition), members unique and sorted, empty ones dropped."""
    by_key: dict[str, dict[str, Any]] = {}
    for b in bindings:
        role = b.get("role") or ""
        key = role + repr(sorted((b.get("condition") or {}).items()))
        merged = by_key.setdefault(key, {"role": role, "members": [],
                                         **({"condition": b["condition"]} if b.get("condition") else {})})
        merged["members"] = sorted(set(merged["members"]) | set(b.get("members") or []))
    return [b for b in by_key.values() if b["members"]]


def _check_role(world: World, role: str, kind: str) -> None:
    custom = CUSTOM_ROLE.match(role)
    if custom:
        roles = world.collection(custom["project"], "roles") if world.project(custom["project"]) else {}
        found = roles.get(custom["id"])
        if found is None or found.get("deleted"):
            raise invalid_argument(UNSUPPORTED_ROLE.format(role=role))
        return
    if not re.fullmatch(r"roles/[A-Za-z0-9_.]+", role) or (kind == "bucket" and not role.startswith("roles/storage.")):
        raise invalid_argument(UNSUPPORTED_ROLE.format(role=role))


def check_member(world: World, member: str) -> None:
    if member in ("allUsers", "allAuthenticatedUsers"):
        return
    if not member.startswith(MEMBER_KINDS):
        raise invalid_argument(BAD_MEMBER)
    pool = WORKLOAD_MEMBER.match(member)
    if pool:
        owner = world.project(pool["pool"].removesuffix(".svc.id.goog"))
        if owner is None or not owner.get("workload_identity_pool"):
            raise invalid_argument(NO_POOL.format(pool=pool["pool"]))
        return
    if not account_exists(world, member.removeprefix("serviceAccount:")) and \
            (ACCOUNT_MEMBER.match(member) or COMPUTE_MEMBER.match(member)):
        raise invalid_argument(NO_ACCOUNT.format(email=member.removeprefix("serviceAccount:")))


def account_exists(world: World, email: str) -> bool:
    """A user-made account of a simulated project, or a project's Compute Engine default
    account (which exists once the Compute API is on); accounts of other domains (Google's
    service agents) are taken as existing."""
    member = "serviceAccount:" + email
    made = ACCOUNT_MEMBER.match(member)
    if made:
        project = world.project(made["project"])
        if project is None:
            return True  # a project this simulator does not hold: not ours to judge
        return email in world.collection(project["id"], "service_accounts")
    compute = COMPUTE_MEMBER.match(member)
    if compute:
        project = world.project(compute["number"])
        return project is None or project["services"].get("compute.googleapis.com") == "ENABLED"
    return True


def retire_member(world: World, member: str, replacement: str) -> None:
    """Rename a member in every policy of every project (a deleted service account)."""
    for project_id in list(world.data["projects"]):
        for policy in world.collection(project_id, COLLECTION).values():
            for binding in policy["bindings"]:
                if member in binding["members"]:
                    binding["members"] = sorted((set(binding["members"]) - {member}) | {replacement})


def drop(world: World, project: str, resource: str) -> None:
    world.collection(project, COLLECTION).pop(resource, None)


def roles_of(world: World, project: str, resource: str, member: str) -> set[str]:
    """The roles a member holds directly on a resource (no inheritance, no conditions)."""
    policy = world.collection(project, COLLECTION).get(resource)
    if policy is None:
        return set()
    return {b["role"] for b in policy["bindings"] if member in b["members"] and "condition" not in b}


# (project id, policy key) of the resource a get/setIamPolicy call names, 404 if it has none.
Resolve = Callable[[Call], "tuple[str, str]"]


def policy_methods(get_id: str, set_id: str, resolve: Resolve) -> None:
    """Registers a resource's getIamPolicy/setIamPolicy (body {"policy": ...}, the newer APIs)."""
    def get_policy(call: Call) -> Any:
        return get(call.world, *resolve(call))

    def set_iam(call: Call) -> Any:
        return set_policy(call.world, *resolve(call), (call.body or {}).get("policy"))

    handles(get_id)(get_policy)
    handles(set_id)(set_iam)
