"""Machines' access tokens, and what a Compute Engine call made with one may do.

A simulated VM's metadata server hands the guest its service account's token at
instance/service-accounts/default/token, as GCE's does ({"access_token", "expires_in",
"token_type": "Bearer"}); the simulator mints one token per account (it never expires here).

A Compute Engine call that carries such a token is checked as IAM checks it: the permission a
Compute method needs has the method's name (compute.instances.setLabels needs
compute.instances.setLabels; true of the methods machines call: instances.get and setLabels),
held through a binding of the project's allow policy for the account, whose role includes it
and whose condition, if any, holds for the resource (Compute's names, e.g.
projects/P/zones/Z/instances/N, type compute.googleapis.com/Instance). Otherwise Compute's 403:
"Required '<permission>' permission for '<resource>'" (reason forbidden; e.g.
terraform-google-modules/cloud-foundation-toolkit#97 quotes one).

Chosen, to stay small: the simulator holds no predefined role's permission list, so only
custom roles grant a machine a permission, and roles/owner and roles/editor grant every one;
a condition is read in the subset IAM Conditions' resource attributes are written in here
(==, startsWith, &&, ||, parentheses over resource.type and resource.name), anything else
grants nothing. Calls without a machine's token are the controller's, made as the project's
owner, and other APIs do not check a machine's token yet.
"""

from __future__ import annotations

import re
import secrets
from typing import Callable
from gcpsim.apis import iam_policy
from gcpsim.errors import ApiError
from gcpsim.routes import Call, guard
from gcpsim.state import World

TOKENS = "access_tokens"  # token -> account email, across projects
ALL_PERMISSIONS = ("roles/owner", "roles/editor")
CUSTOM_ROLE = re.compile(r"^projects/(?P<project>[^/]+)/roles/(?P<id>[^/]+)$")
TOKEN_RE = re.compile(r'\s*(\(|\)|&&|\|\||==|"(?:[^"\\]|\\.)*"|[A-Za-z_.]+\("(?:[^"\\]|\\.)*"\)|[A-Za-z_.]+)')


def mint(world: World, email: str) -> str:
    """The account's token (one per account, kept in the world)."""
    tokens = world.names(TOKENS)
    found = next((token for token, owner in tokens.items() if owner == email), None)
    if found is None:
        found = "ya29.sim-" + secrets.token_urlsafe(24)
        tokens[found] = email
    return found


def resource_of(call: Call) -> tuple[str, str]:
    """(resource type, resource name) of a Compute call, as IAM Conditions name them."""
    p = call.params
    if "instance" in p and "zone" in p:
        return "compute.googleapis.com/Instance", f"projects/{p['project']}/zones/{p['zone']}/instances/{p['instance']}"
    return "cloudresourcemanager.googleapis.com/Project", f"projects/{p.get('project', '')}"


def _tokens(expression: str) -> list[str]:
    out, at = [], 0
    while at < len(expression.rstrip()):
        m = TOKEN_RE.match(expression, at)
        if m is None:
            raise ValueError(expression[at:])
        out.append(m[1])
        at = m.end()
    return out


def condition_holds(expression: str, resource: dict[str, str]) -> bool:
    """The expression over resource.type / resource.name; one outside the subset holds nowhere."""
    try:
        tokens = _tokens(expression)
        value, rest = _or(tokens, resource)
    except (ValueError, IndexError, KeyError):
        return False
    return value and not rest


Parsed = tuple[bool, list[str]]


def _chain(tokens: list[str], r: dict[str, str], op: str, operand: Callable[[list[str], dict[str, str]], Parsed]
           ) -> Parsed:
    """`operand (op operand)*`; both sides are evaluated, as CEL may."""
    value, tokens = operand(tokens, r)
    while tokens and tokens[0] == op:
        right, tokens = operand(tokens[1:], r)
        value = (value or right) if op == "||" else (value and right)
    return value, tokens


def _or(tokens: list[str], r: dict[str, str]) -> Parsed:
    return _chain(tokens, r, "||", _and)


def _and(tokens: list[str], r: dict[str, str]) -> Parsed:
    return _chain(tokens, r, "&&", _term)


def _term(tokens: list[str], r: dict[str, str]) -> Parsed:
    if tokens[0] == "(":
        value, rest = _or(tokens[1:], r)
        if rest[0] != ")":
            raise ValueError("unbalanced")
        return value, rest[1:]
    call = re.fullmatch(r'resource\.(type|name)\.startsWith\("(.*)"\)', tokens[0])
    if call:
        return r[call[1]].startswith(call[2]), tokens[1:]
    attribute = re.fullmatch(r"resource\.(type|name)", tokens[0])
    if attribute and tokens[1] == "==" and tokens[2].startswith('"'):
        return r[attribute[1]] == tokens[2][1:-1], tokens[3:]
    raise ValueError(tokens[0])


def _role_grants(world: World, role: str, permission: str) -> bool:
    if role in ALL_PERMISSIONS:
        return True
    custom = CUSTOM_ROLE.match(role)
    if custom is None or world.project(custom["project"]) is None:
        return False
    found = world.collection(custom["project"], "roles").get(custom["id"]) or {}
    return not found.get("deleted") and permission in (found.get("includedPermissions") or [])


def permitted(world: World, project: str, email: str, permission: str, resource: dict[str, str]) -> bool:
    policy = world.collection(project, iam_policy.COLLECTION).get(f"projects/{project}") or {}
    return any(f"serviceAccount:{email}" in b.get("members", []) and _role_grants(world, b["role"], permission)
               and ("condition" not in b or condition_holds(b["condition"].get("expression", ""), resource))
               for b in policy.get("bindings", []))


@guard
def machine_calls_as_its_account(call: Call) -> None:
    bearer = call.headers.get("authorization", "")
    email = call.world.names(TOKENS).get(bearer.removeprefix("Bearer ").strip()) if bearer else None
    if email is None or not call.method.id.startswith("compute."):
        return
    kind, name = resource_of(call)
    if not permitted(call.world, call.project_id, email, call.method.id, {"type": kind, "name": name}):
        raise ApiError(403, f"Required '{call.method.id}' permission for '{name}'", reason="forbidden")
