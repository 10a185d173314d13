"""Provider resources: an explicit `pulumi:providers:<pkg>` the program declares, or the default
provider the engine makes from the stack's `<pkg>:*` config for resources that name none. Every
resource's state records its provider as `<provider urn>::<provider id>`, so deletes and
refreshes configure the same provider without running the program."""

from __future__ import annotations

import uuid
from typing import Any, Callable

from gcpsim.pulumi.plugins import Package, PackageFactory, ProviderError, inputs_of

PROVIDER_PREFIX = "pulumi:providers:"


def is_provider_type(token: str) -> bool:
    return token.startswith(PROVIDER_PREFIX)


def package_of(token: str) -> str:
    return token.removeprefix(PROVIDER_PREFIX) if is_provider_type(token) else token.split(":")[0]


class ProviderRegistry:
    def __init__(self, project: str, stack: str, factories: dict[str, PackageFactory],
                 config: dict[str, Any], olds: dict[str, dict[str, Any]]) -> None:
        self.project, self.stack = project, stack
        self.factories = factories
        self.config = config
        self.states = {urn: s for urn, s in olds.items() if is_provider_type(s["type"])}
        self.registered: set[str] = set()
        self._packages: dict[str, Package] = {}

    def register(self, goal: Any, old: dict[str, Any] | None, make_state: Callable[..., dict[str, Any]]
                 ) -> dict[str, Any]:
        """A provider keeps its id across updates (its configuration changes in place)."""
        id_ = old["id"] if old and not old.get("delete") else str(uuid.uuid4())
        state = make_state(goal, id_, dict(goal.inputs))
        self.states[goal.urn] = state
        self.registered.add(goal.urn)
        self._packages.pop(f"{goal.urn}::{id_}", None)
        return state

    def package_for(self, goal: Any, make_state: Callable[..., dict[str, Any]],
                    record: Callable[[dict[str, Any]], None]) -> tuple[Package, str]:
        if goal.provider:
            return self.package(goal.provider), goal.provider
        pkg = package_of(goal.type)
        urn = f"urn:pulumi:{self.stack}::{self.project}::{PROVIDER_PREFIX}{pkg}::default"
        if urn not in self.registered:
            inputs = {key.split(":", 1)[1]: value for key, value in self.config.items()
                      if key.startswith(pkg + ":")}
            from gcpsim.pulumi.goal import Goal

            default = Goal(urn=urn, type=PROVIDER_PREFIX + pkg, name="default", custom=True, inputs=inputs)
            record(self.register(default, self.states.get(urn), make_state))
        return self.package(f"{urn}::{self.states[urn]['id']}"), f"{urn}::{self.states[urn]['id']}"

    def package(self, ref: str) -> Package:
        if ref not in self._packages:
            urn = ref.rsplit("::", 1)[0]
            state = self.states.get(urn)
            if state is None:
                raise ProviderError(f"unknown provider {ref!r}")
            pkg = package_of(state["type"])
            factory = self.factories.get(pkg)
            if factory is None:
                raise ProviderError(f"no resource plugin 'pulumi-resource-{pkg}' found: the simulator's "
                                    f"pulumi has providers for {', '.join(sorted(self.factories)) or 'none'}")
            self._packages[ref] = factory(inputs_of(state["inputs"]))
        return self._packages[ref]

    def resource_type(self, state: dict[str, Any]) -> Any:
        return self.package(state["provider"]).resource(state["type"])
