"""The registry of providers: one module per provider, chosen by the stack.

Callers ask this registry for the stack's realizer (infra/providers/protocol.py documents what
it does) and for its Capabilities, and never branch on the provider themselves. Adding a provider
is a new module implementing the protocol and a line in PROVIDERS.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, cast

from infra.errors import ConfigError
from infra.providers.protocol import Capabilities, PlanRow, Progress, Realizer, StackInfo
from infra.providers.stack_home import recorded_provider, stacks_with_state

if TYPE_CHECKING:  # the models load pydantic: `trainctl ls` with nothing up never needs them
    from infra.providers.inventory import Inventory
    from infra.spec.cluster import ClusterSpec

__all__ = ["PROVIDERS", "Capabilities", "PlanRow", "Progress", "Realizer", "StackInfo", "Unsupported",
           "capabilities", "for_spec", "for_stack", "inventory", "live", "provider_of", "realizer", "reap",
           "spec", "unsupported"]

# provider name (ClusterSpec.provider) -> module implementing Realizer; imported on first use so
# a local command never loads Pulumi or Google's clients.
PROVIDERS = {"local": "infra.providers.local.realizer", "gcp": "infra.providers.gcp.realizer"}


class Unsupported(ConfigError):
    """A verb the stack's provider cannot do (exit 2, saying why)."""


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


def capabilities(spec: ClusterSpec) -> Capabilities:
    """What the spec's stack can do and needs: what callers ask instead of its provider."""
    return for_spec(spec).capabilities(spec)


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


def unsupported(provider: str, verb: str, why: str) -> Unsupported:
    return Unsupported(f"`{verb}` is not available on {provider} stacks: {why}")
