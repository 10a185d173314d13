"""What the engine asks of a resource provider, and the parts every bridged provider shares.

A provider package (`gcp`) is built from its provider resource's inputs (an explicit
`gcp.Provider(...)` or the default provider made from the stack's `gcp:*` config) and answers,
per resource type, the calls the engine makes of a Pulumi resource provider: check (defaults,
auto-names), diff (update or replace), create, read, update and delete.

`BridgedResource` carries what pulumi-terraform-bridge decides for every Terraform-based
resource, so the GCP types only state their own schema facts:
  - auto-naming: a string input property literally called "name" is auto-named
    (info.SetAutonaming, pkg/tfbridge/info/autonaming.go), as are the fields a provider names
    itself (pulumi-gcp: serviceaccount.Account's account_id); a missing one gets
    `<logical name>-<7 hex>` and is listed in `__defaults`;
  - delete-before-replace: a replacement deletes first where the resource info says so or where
    an auto-nameable property was set by the program rather than the auto-namer, since the new
    resource would take the same name (nameRequiresDeleteBeforeReplace, pkg/tfbridge/schema.go);
  - replace vs update: any changed property the Terraform schema marks ForceNew replaces.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol

from gcpsim.pulumi.properties import changed_paths, plain

DEFAULTS_KEY = "__defaults"


class ProviderError(Exception):
    """A failed provider call, with the text the CLI prints for it. `partial` is the id and
    state of a resource that exists although its create failed (kept in the state, as the
    engine keeps a partially created resource)."""

    def __init__(self, message: str, partial: tuple[str, dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.partial = partial


@dataclass
class Diff:
    changed: list[str] = field(default_factory=list)  # dotted paths that differ
    replaces: list[str] = field(default_factory=list)  # those of them that force a replacement
    delete_before_replace: bool = False

    @property
    def needs_replace(self) -> bool:
        return bool(self.replaces)


class ResourceType(Protocol):
    token: str

    def check(self, name: str, news: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]: ...

    def diff(self, old_inputs: dict[str, Any], state: dict[str, Any], news: dict[str, Any]) -> Diff: ...

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]: ...

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None: ...

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]: ...

    def delete(self, id_: str, state: dict[str, Any]) -> None: ...


class Package(Protocol):
    def resource(self, token: str) -> ResourceType: ...


# Builds a configured package from its provider resource's (plain) inputs.
PackageFactory = Callable[[dict[str, Any]], Package]


def unknown_type(token: str, package: str) -> ProviderError:
    return ProviderError(f"unknown resource type {token!r}: the simulator's {package} provider "
                         "does not model it")


class BridgedResource:
    """Defaults for a Terraform-bridged resource type; subclasses set the schema facts."""

    token: ClassVar[str] = ""
    autoname: ClassVar[str | None] = "name"  # the auto-nameable property, if any
    autoname_max: ClassVar[int] = 255
    autoname_lower: ClassVar[bool] = False
    always_delete_before_replace: ClassVar[bool] = False  # ResourceInfo.DeleteBeforeReplace
    force_new: ClassVar[frozenset[str]] = frozenset()  # ForceNew properties, dotted paths
    maps: ClassVar[frozenset[str]] = frozenset({"labels", "metadata", "resourceLabels"})
    create_timeout: float | None = None  # seconds; None: the provider's default
    update_timeout: float | None = None  # seconds; None: the provider's default

    def suppress(self, path: str, new: Any, old: Any) -> bool:
        """The schema's DiffSuppressFunc/StateFunc for `path` (none by default)."""
        return False

    def check(self, name: str, news: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        news = dict(news)
        field_ = self.autoname
        if field_ is None or news.get(field_) not in (None, ""):
            news[DEFAULTS_KEY] = []
            return news
        if olds and field_ in (olds.get(DEFAULTS_KEY) or []) and olds.get(field_):
            news[field_] = olds[field_]  # an auto-name lives as long as the resource
        else:
            base = name.lower() if self.autoname_lower else name
            news[field_] = f"{base}-{secrets.token_hex(4)[:7]}"[: self.autoname_max]
        news[DEFAULTS_KEY] = [field_]
        return news

    def diff(self, old_inputs: dict[str, Any], state: dict[str, Any], news: dict[str, Any]) -> Diff:
        changed = changed_paths(news, state, self.maps, self.suppress)
        replaces = [p for p in changed if self.forces_new(p)]
        return Diff(changed, replaces, self.delete_before_replace(news) if replaces else False)

    def forces_new(self, path: str) -> bool:
        return any(path == f or path.startswith(f + ".") or f.startswith(path + ".")
                   for f in self.force_new)

    def delete_before_replace(self, news: dict[str, Any]) -> bool:
        if self.always_delete_before_replace:
            return True
        return (self.autoname is not None and self.autoname in news
                and self.autoname not in (news.get(DEFAULTS_KEY) or []))


def inputs_of(values: dict[str, Any]) -> dict[str, Any]:
    """Inputs as a provider sees them: plain values, without the engine's reserved keys."""
    return {k: plain(v) for k, v in values.items() if not k.startswith("__")}
