"""Which realizer owns a stack, and the few verbs every realizer offers."""

from __future__ import annotations

from typing import Any, Callable

from infra.inventory import Inventory
from infra.local import realizer as local
from infra.local.state import state_dir
from infra.spec import ClusterSpec
from infra.stack_config import ConfigError, load_stack, stack_path

Progress = Callable[[str], None]


def provider_of(stack: str) -> str:
    """A stack with local state is local; otherwise its stack file decides."""
    if state_dir(stack).exists():
        return "local"
    if stack_path(stack).is_file():
        return load_stack(stack).provider
    return "local"  # ephemeral local stacks have no file; `down` of an unknown one is a no-op


def _gcp_unavailable(what: str) -> ConfigError:
    return ConfigError(f"{what} for gcp stacks is not available in this build")


def plan(spec: ClusterSpec) -> list[dict[str, Any]]:
    if spec.provider == "local":
        return local.plan(spec)
    raise _gcp_unavailable("plan")


def up(spec: ClusterSpec, progress: Progress) -> Inventory:
    if spec.provider == "local":
        return local.up(spec, progress)
    raise _gcp_unavailable("up")


def down(stack: str, progress: Progress, force: bool = False) -> bool:
    if provider_of(stack) == "local":
        return local.down(stack, force=force, progress=progress)
    raise _gcp_unavailable("down")


def inventory(stack: str) -> Inventory:
    if provider_of(stack) == "local":
        return local.load_inventory(stack)
    raise _gcp_unavailable("inventory")
