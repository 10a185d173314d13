"""Google's discovery documents: which requests each API takes, and the shape of their bodies.

The simulator routes and checks requests by these documents (as shipped in
google-api-python-client's discovery cache), so a path, verb, query parameter or body field the
real API would not take is refused here too, and no route is written by hand.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Iterator

# name.version of every API the simulator answers (the discovery cache's file names).
# container.v1beta1: the Terraform provider pulumi-gcp bridges calls GKE through its v1beta1
# client, whatever the custom endpoint says (google-beta/services/container/client.go).
APIS = ("compute.v1", "tpu.v2", "container.v1", "container.v1beta1", "serviceusage.v1", "cloudresourcemanager.v1",
        "cloudresourcemanager.v3", "iam.v1", "storage.v1", "artifactregistry.v1",
        "cloudfunctions.v2", "run.v2", "cloudscheduler.v1")

# Added by Google's client libraries to every request: the generated REST clients send
# `$alt=json;enum-encoding=int`; `requestId`-style parameters are the methods' own.
SYSTEM_QUERY = frozenset({"$alt", "$.xgafv", "alt", "fields", "key", "prettyPrint", "quotaUser",
                          "access_token", "oauth_token", "callback", "uploadType",
                          "upload_protocol", "userIp", "userProject"})


@dataclass(frozen=True)
class Api:
    name: str  # "compute"
    version: str  # "v1"
    doc: dict[str, Any] = field(repr=False, compare=False, hash=False)

    @property
    def service(self) -> str:
        """The service a project enables to use this API: compute.googleapis.com."""
        return self.doc["rootUrl"].removeprefix("https://").rstrip("/")

    @property
    def key(self) -> str:
        return f"{self.name}.{self.version}"

    @property
    def legacy_errors(self) -> bool:
        """Compute and Storage answer errors with an `errors` list (domain, reason); the newer
        APIs answer google.rpc.Status (status, details)."""
        return self.name in ("compute", "storage")

    def schema(self, ref: str) -> dict[str, Any]:
        return self.doc["schemas"][ref]


@dataclass(frozen=True)
class Method:
    api: Api
    id: str  # "compute.instances.insert"
    http: str
    path: str  # the discovery template, relative to the API's root
    parameters: dict[str, Any] = field(repr=False, compare=False, hash=False)
    request: str | None  # schema name of the body
    response: str | None
    regex: re.Pattern[str] = field(repr=False, compare=False, hash=False)

    def path_params(self, match: re.Match[str]) -> dict[str, str] | None:
        """The path parameters of a match, or None where one breaks its documented pattern."""
        from urllib.parse import unquote

        values = {}
        for group, raw in match.groupdict().items():
            name = group.replace("__", ".")
            value = unquote(raw)
            pattern = self.parameters.get(name, {}).get("pattern")
            if pattern and not re.fullmatch(pattern.removeprefix("^").removesuffix("$"), value):
                return None
            values[name] = value
        return values

    def query_names(self) -> set[str]:
        return {name for name, p in self.parameters.items() if p.get("location") == "query"}


def _template_regex(prefix: str, template: str) -> re.Pattern[str]:
    """`v2/{+parent}/nodes` -> a regex over the raw (still percent-encoded) request path."""
    out, pos = ["^", re.escape(prefix)], 0
    for m in re.finditer(r"\{(\+?)([^}]+)\}", template):
        out.append(re.escape(template[pos:m.start()]))
        group = m[2].replace(".", "__")
        out.append(f"(?P<{group}>.+?)" if m[1] else f"(?P<{group}>[^/]+?)")
        pos = m.end()
    out.append(re.escape(template[pos:]) + "$")
    return re.compile("".join(out))


def _walk(resources_: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in resources_.values():
        yield from resource.get("methods", {}).values()
        yield from _walk(resource.get("resources", {}))


def _methods(api: Api) -> Iterator[Method]:
    base = "/" + api.doc["servicePath"]
    for m in _walk(api.doc.get("resources", {})):
        paths = [base + m["path"]]
        # Media uploads (Storage objects.insert) have paths of their own, absolute.
        for protocol in m.get("mediaUpload", {}).get("protocols", {}).values():
            paths.append(protocol["path"])
        for path in paths:
            yield Method(api, m["id"], m["httpMethod"], path, m.get("parameters", {}),
                         (m.get("request") or {}).get("$ref"), (m.get("response") or {}).get("$ref"),
                         _template_regex("", path))


@functools.cache
def api(key: str) -> Api:
    name, version = key.split(".")
    text = (resources.files("googleapiclient") / "discovery_cache" / "documents" / f"{key}.json").read_text()
    return Api(name, version, json.loads(text))


@dataclass(frozen=True)
class Route:
    method: Method
    params: dict[str, str]


class Router:
    """Every method of the simulated APIs, found by verb and raw path."""

    def __init__(self, keys: tuple[str, ...] = APIS) -> None:
        self.by_verb: dict[str, list[Method]] = {}
        for key in keys:
            for method in _methods(api(key)):
                self.by_verb.setdefault(method.http, []).append(method)
        # Literal segments first: `instances/{instance}/start` before `instances/{instance}`.
        for methods in self.by_verb.values():
            methods.sort(key=lambda m: -len(re.sub(r"\{[^}]+\}", "", m.path)))

    def match(self, verb: str, raw_path: str) -> list[Route]:
        """All methods that take this request (several only where APIs share a path shape,
        e.g. `v1/projects/p/locations/l/operations/o` of GKE and Artifact Registry)."""
        found = []
        for method in self.by_verb.get(verb, ()):
            m = method.regex.match(raw_path)
            if m is None:
                continue
            params = method.path_params(m)
            if params is not None:
                found.append(Route(method, params))
        return found


@functools.cache
def router() -> Router:
    return Router()
