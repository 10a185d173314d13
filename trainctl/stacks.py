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
    """The provider recorded in the stack's state; otherwise its stack file decides."""
    if (state_dir(stack) / "gcp.json").exists():
        return "gcp"
    if state_dir(stack).exists():
        return "local"
    if stack_path(stack).is_file():
        return load_stack(stack).provider
    return "local"  # ephemeral local stacks have no file; `down` of an unknown one is a no-op


def plan(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Resources `up` would create. GCP: the Pulumi program itself, evaluated under mocks."""
    if spec.provider == "local":
        return local.plan(spec)
    from infra.gcp.mocks import evaluate

    from infra.gcp.storage import kept_on_down

    declared = evaluate(spec).resources
    _refuse_policy_violations(spec, declared)
    rows = [{"kind": r.type.removeprefix("gcp:").split(":")[0] if r.type.startswith("gcp:") else r.type,
             "name": r.inputs.get("name", r.name), **_summary(r.inputs)}
            for r in declared]
    for row in rows:
        if row["kind"] == "storage/bucket":
            row["on_down"] = "kept" if kept_on_down(spec) else "deleted with its objects"
    return rows


def _refuse_policy_violations(spec: ClusterSpec, declared: list[Any]) -> None:
    """The policy pack `pulumi up --policy-pack policy` enforces, run here over the mocked
    resources: a stack GCP would refuse (or `down` could not remove) fails at `plan`, exit 2,
    before anything is created."""
    from policy.rules import Resource, check_resources

    violations = check_resources([Resource(r.type, r.name, r.inputs, getattr(r, "options", None) or {})
                                  for r in declared])
    if violations:
        lines = "\n".join(f"  - {v}" for v in violations)
        raise ConfigError(f"stack {spec.name!r} violates {len(violations)} GCP policy rule(s):\n{lines}")


def _summary(inputs: dict[str, Any]) -> dict[str, Any]:
    keys = ("machineType", "acceleratorType", "runtimeVersion", "zone", "location", "sourceRanges",
            "nodeCount", "ipCidrRange")
    return {k: inputs[k] for k in keys if k in inputs}


def up(spec: ClusterSpec, progress: Progress) -> Inventory:
    if spec.provider == "local":
        return local.up(spec, progress)
    from infra.gcp import realizer as gcp

    return gcp.up(spec, progress)


def down(stack: str, progress: Progress, force: bool = False) -> bool:
    if provider_of(stack) == "local":
        return local.down(stack, force=force, progress=progress)
    from infra.gcp import realizer as gcp

    return gcp.down(stack, progress)


def inventory(stack: str) -> Inventory:
    if provider_of(stack) == "local":
        return local.load_inventory(stack)
    path = state_dir(stack) / "inventory.json"
    if not path.exists():
        raise ConfigError(f"stack {stack!r} is not up (no {path}); run `trainctl up --stack {stack}`")
    return Inventory.read(path)
