"""The options several verbs share, checked as they are parsed: bad input exits 2 naming the
option and the fix, before anything is created. Models and stack files load only when a verb
runs, so that `--help` stays quick (bench/cli_start.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeVar

import typer

from infra.errors import ConfigError
from infra.providers import realizers

if TYPE_CHECKING:
    from pydantic import BaseModel

    from infra.providers.inventory import Inventory
    from infra.spec.budget import Budget
    from infra.spec.cluster import ClusterSpec

Model = TypeVar("Model", bound="BaseModel")


def stack_argument(value: str) -> str:
    """A stack name (it names folders and interfaces) or the path of a stack file."""
    if Path(value).suffix in (".yaml", ".yml"):
        return value
    from infra.spec.cluster import validate_name

    try:
        return validate_name(value, "--stack")
    except ValueError as exc:
        raise ConfigError(f"{exc}; or give the path of a stack file (*.yaml)") from None


def live_stack_argument(value: str) -> str:
    """The name of a stack that is up: a stack file's path names the stack it declares (state,
    namespaces and the inventory are kept by name, not by the file)."""
    if Path(value).suffix not in (".yaml", ".yml"):
        return stack_argument(value)
    from infra.spec.stack_config import load_stack

    return load_stack(value).name


def run_id_argument(value: str | None) -> str | None:
    from trainctl.launchers.spec import check_run_id

    try:
        return None if value is None else check_run_id(value)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


StackOpt = Annotated[str, typer.Option("--stack", "-s", callback=stack_argument,
                                       help="stack name (stacks/Pulumi.<stack>.yaml) or stack file")]
LiveStackOpt = Annotated[str, typer.Option("--stack", "-s", callback=live_stack_argument,
                                           help="stack name (stacks/Pulumi.<stack>.yaml) or the stack file it was stood up from")]
NodesOpt = Annotated[Optional[str], typer.Option("--nodes", help="comma-separated node names or ranks")]
SimulateOpt = Annotated[bool, typer.Option(
    "--simulate", help="gcp stacks: stand the stack up in a simulated project on this machine "
                       "(no Google account; the GCP realizer runs end to end against it)")]
SimulatedProjectOpt = Annotated[Optional[Path], typer.Option(
    "--simulated-project", help="YAML describing the simulated project (APIs off, quotas, "
                                "stockouts); implies --simulate")]


def budget_option(value: str | None) -> Budget | None:
    """`--budget max_usd=5,max_usd_per_hour=2`: a Budget, or exit 2 naming what is wrong."""
    if value is None:
        return None
    from infra.spec.budget import parse_budget_option

    return parse_budget_option(value)


BudgetOpt = Annotated[Optional[str], typer.Option(
    "--budget", metavar="max_usd=USD,max_usd_per_hour=USD",
    help="over the file's budget: refuse a cluster over max_usd_per_hour (list prices); stop a run "
         "or sweep, checkpointed, before it spends more than max_usd")]
RunsDirOpt = Annotated[Optional[Path], typer.Option(help="where runs/<run-id>/ are (default: runs/ in the project root)")]


def runs_root() -> Path:
    """Runs are kept in the project (trainctl init, or trainctl's own checkout), wherever a
    command is started from, as its stacks are read from there."""
    from infra.spec.stack_config import project_root

    return project_root() / "runs"


def node_list(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def validated(model: type[Model], **kwargs: Any) -> Model:
    """A model built from options: a value it refuses is bad input, named, not a traceback."""
    from pydantic import ValidationError

    from infra.spec.stack_config import format_validation_error

    try:
        return model(**kwargs)
    except ValidationError as exc:
        raise ConfigError(format_validation_error("arguments", exc)) from None


def simulate_if_asked(spec: ClusterSpec, simulate: bool, project_file: Path | None) -> None:
    if simulate or project_file is not None:
        from infra.providers import simulated_project

        simulated_project.start(spec, project_file)


def nodes_over_ssh(stack: str, verb: str) -> Inventory:
    """The inventory of a stack whose nodes answer over SSH; a GKE stack's work runs in pods."""
    inventory = realizers.inventory(stack)
    if not inventory.nodes:
        raise ConfigError(
            f"`trainctl {verb}` reaches nodes over SSH, and stack {stack} has none: its work runs "
            f"as GKE pods. `trainctl launch --stack {stack} -- CMD` runs a Job and streams its "
            f"logs; for pods use kubectl with KUBECONFIG={inventory.kubeconfig}")
    return inventory
