"""The realizer interface and its registry: one module per provider, chosen by the stack.

A realizer turns a ClusterSpec into running nodes and back (the shape of SkyPilot's provision
interface: typed in, typed out). Callers ask this registry for the stack's realizer and never
branch on the provider themselves. A provider is a module exposing the functions of `Realizer`;
adding one is a new module and a line in PROVIDERS.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, cast

from infra.errors import ConfigError
from infra.providers.stack_home import recorded_provider, stacks_with_state

if TYPE_CHECKING:  # the models load pydantic: `trainctl ls` with nothing up never needs them
    from infra.spec.cost import Estimate
    from infra.providers.inventory import Inventory
    from infra.spec.cluster import ClusterSpec

Progress = Callable[[str], None]

# provider name (ClusterSpec.provider) -> module implementing Realizer; imported on first use so
# a local command never loads Pulumi or Google's clients.
PROVIDERS = {"local": "infra.providers.local.realizer", "gcp": "infra.providers.gcp.realizer"}


@dataclass(frozen=True)
class StackInfo:
    """A live stack as `trainctl ls` and the reaper see it."""

    stack: str
    provider: str
    nodes: int
    age_h: float
    ttl_left_h: float
    cost_so_far: float
    broken: bool = False  # its state could not be read: `down --force` is the way out


class Realizer(Protocol):
    # Whether `repair` brings nodes back at the addresses they had (what the others were told)
    repair_keeps_addresses: bool

    def plan(self, spec: ClusterSpec) -> list[dict[str, Any]]: ...

    def estimate(self, spec: ClusterSpec) -> Estimate: ...

    def up(self, spec: ClusterSpec, progress: Progress) -> Inventory: ...

    def down(self, stack: str, *, force: bool, progress: Progress) -> bool: ...

    def inventory(self, stack: str) -> Inventory: ...

    def spec(self, stack: str) -> ClusterSpec: ...

    def info(self, stack: str) -> StackInfo: ...

    def reap(self, *, project: str | None, dry_run: bool, progress: Progress) -> list[str]: ...

    def repair(self, stack: str, nodes: list[str], progress: Progress) -> Inventory: ...

    def simulate(self, spec: ClusterSpec, project_file: Path | None) -> None:
        """Point this process at a simulated project (`--simulate`) where the provider has one."""
        ...

    def instance_status(self, stack: str, nodes: list[str]) -> dict[str, str | None]:
        """RUNNING, TERMINATED (stopped) or None (gone) per node, as the provider reports it."""
        ...

    def preempt(self, stack: str, node: str, *, grace: float, progress: Progress,
                action: str | None = None, unavailable_for: float = 0.0) -> str:
        """Reclaim a spot node as the provider would (where something can ask it to), and
        leave the zone without capacity for it for `unavailable_for` seconds."""
        ...


def realizer(provider: str) -> Realizer:
    if provider not in PROVIDERS:
        raise ConfigError(f"unknown provider {provider!r}; known: {', '.join(sorted(PROVIDERS))}")
    return cast(Realizer, importlib.import_module(PROVIDERS[provider]))


def provider_of(stack: str) -> str:
    """The provider recorded in the stack's state; a stack with no state here is its file's
    (a GCP stack made by `pulumi up` alone); an unknown name is local (an ephemeral stack, whose
    `down` is a no-op)."""
    from infra.spec.stack_config import load_stack, stack_path

    recorded = recorded_provider(stack)
    if recorded:
        return recorded
    if stack_path(stack).is_file():
        return load_stack(stack).provider
    return "local"


def for_stack(stack: str) -> Realizer:
    return realizer(provider_of(stack))


def for_spec(spec: ClusterSpec) -> Realizer:
    return realizer(spec.provider)


def inventory(stack: str) -> Inventory:
    return for_stack(stack).inventory(stack)


def spec(stack: str) -> ClusterSpec:
    """The spec a live stack was realized from (ephemeral stacks have no stack file)."""
    return for_stack(stack).spec(stack)


def live() -> list[StackInfo]:
    """Every stack with state on this machine, whoever realized it."""
    return [for_stack(stack).info(stack) for stack in stacks_with_state()]


def reap(project: str | None, dry_run: bool, progress: Progress) -> list[str]:
    """Each provider removes what outlived its TTL in its own reach (this machine, a project)."""
    return [found for name in PROVIDERS for found in realizer(name).reap(
        project=project, dry_run=dry_run, progress=progress)]


def unsupported(provider: str, verb: str, why: str) -> ConfigError:
    return ConfigError(f"`{verb}` is not available on {provider} stacks: {why}")
