"""IAM v1 service accounts and their IAM policies.

https://cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts
An account's id is 6-30 characters matching `[a-z]([-a-z0-9]*[a-z0-9])` (the create method's
reference); its email is `<id>@<project>.iam.gserviceaccount.com`; it is named
`projects/<project>/serviceAccounts/<email or unique id>`. A deleted account's bindings stay in
the policies that held them, renamed to `deleted:serviceAccount:<email>?uid=<unique id>`
(iam_policy.retire_member), and its id may be used again by a new account with a new unique id.

Chosen: the simulator answers at once where IAM is eventually consistent (a new account is
visible to `get` right away); `projects/-` in a name is not supported (the server admits calls
by project). Undelete and keys are not simulated.
"""

from __future__ import annotations

import re
from typing import Any

from gcpsim.apis import iam_policy
from gcpsim.errors import ApiError, invalid_argument
from gcpsim.routes import Call, handles
from gcpsim.state import World

ACCOUNTS = "service_accounts"
ACCOUNT_ID = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
RESOURCE_INFO = "type.googleapis.com/google.rpc.ResourceInfo"


def email_of(account_id: str, project_id: str) -> str:
    return f"{account_id}@{project_id}.iam.gserviceaccount.com"


def _unique_id(world: World) -> str:
    # 21 digits, as Google's are
    return str(100_000_000_000_000_000_000 + world.next_id())


def find(world: World, name: str) -> tuple[str, dict[str, Any]]:
    """(project id, account) for `projects/<p>/serviceAccounts/<email or unique id>`; 404 as IAM."""
    _, project_ref, _, key = name.split("/", 3)
    project = world.project(project_ref)
    accounts = world.collection(project["id"], ACCOUNTS) if project else {}
    account = accounts.get(key) or next((a for a in accounts.values() if a["uniqueId"] == key), None)
    if project is None or account is None:
        # https://github.com/GoogleCloudPlatform/python-docs-samples/issues/10243
        raise ApiError(404, f"Service account {name} does not exist.")
    return project["id"], account


def _check_account_id(account_id: str) -> None:
    if not 6 <= len(account_id) <= 30:
        # https://github.com/google/litmus/issues/107 (2025), DataDog/stratus-red-team#294
        raise invalid_argument(f'The account ID "{account_id}" does not have a length between 6 and 30.')
    if not ACCOUNT_ID.fullmatch(account_id):
        # IAM's answer to an id the pattern refuses carries no detail
        # (https://github.com/hashicorp/terraform-provider-google/pull/793)
        raise invalid_argument("Request contains an invalid argument.")


@handles("iam.projects.serviceAccounts.create")
def create(call: Call) -> Any:
    project_id = call.project_id
    body = call.body or {}
    account_id = body.get("accountId") or ""
    _check_account_id(account_id)
    email = email_of(account_id, project_id)
    accounts = call.world.collection(project_id, ACCOUNTS)
    if email in accounts:
        # https://github.com/GoogleCloudPlatform/marketing-analytics-jumpstart/issues/200
        raise ApiError(409, f"Service account {account_id} already exists within project projects/{project_id}.",
                       reason="alreadyExists", details=[{"@type": RESOURCE_INFO,
                                                         "resourceName": f"projects/{project_id}/serviceAccounts/{email}"}])
    given = body.get("serviceAccount") or {}
    unique = _unique_id(call.world)
    accounts[email] = {"name": f"projects/{project_id}/serviceAccounts/{email}", "projectId": project_id,
                       "uniqueId": unique, "email": email, "oauth2ClientId": unique,
                       "etag": iam_policy.etag_for(call.world.next_id()),
                       **{k: given[k] for k in ("displayName", "description") if given.get(k)}}
    return accounts[email]


@handles("iam.projects.serviceAccounts.get")
def get(call: Call) -> Any:
    return find(call.world, call.params["name"])[1]


@handles("iam.projects.serviceAccounts.list")
def list_(call: Call) -> Any:
    accounts = call.world.collection(call.project_id, ACCOUNTS)
    return {"accounts": [accounts[k] for k in sorted(accounts)]} if accounts else {}


@handles("iam.projects.serviceAccounts.delete")
def delete(call: Call) -> Any:
    project_id, account = find(call.world, call.params["name"])
    del call.world.collection(project_id, ACCOUNTS)[account["email"]]
    iam_policy.drop(call.world, project_id, account["name"])
    iam_policy.retire_member(call.world, f"serviceAccount:{account['email']}",
                             f"deleted:serviceAccount:{account['email']}?uid={account['uniqueId']}")
    return {}


@handles("iam.projects.serviceAccounts.patch")
def patch(call: Call) -> Any:
    _, account = find(call.world, call.params["name"])
    body = call.body or {}
    given = body.get("serviceAccount") or {}
    for field in (body.get("updateMask") or "").split(","):
        field = {"display_name": "displayName"}.get(field.strip(), field.strip())
        if field in ("displayName", "description"):  # the only fields a caller may set
            account[field] = given.get(field, "")
    account["etag"] = iam_policy.etag_for(call.world.next_id())
    return account


def _set_disabled(call: Call, disabled: bool) -> Any:
    _, account = find(call.world, call.params["name"])
    if disabled:
        account["disabled"] = True
    else:
        account.pop("disabled", None)
    return {}


@handles("iam.projects.serviceAccounts.disable")
def disable(call: Call) -> Any:
    return _set_disabled(call, True)


@handles("iam.projects.serviceAccounts.enable")
def enable(call: Call) -> Any:
    return _set_disabled(call, False)


def _policy_of(call: Call) -> tuple[str, str]:
    project_id, account = find(call.world, call.params["resource"])
    return project_id, account["name"]


iam_policy.policy_methods("iam.projects.serviceAccounts.getIamPolicy", "iam.projects.serviceAccounts.setIamPolicy",
                          _policy_of)
