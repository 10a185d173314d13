"""What runs between bootstrap and step 0, each where the experiment asks for it and timed as its
own phase: the data inputs staged onto every node, and the network pre-flight."""

from __future__ import annotations

import contextlib
import json
from typing import Any, Callable

from infra.providers import realizers
from infra.providers.inventory import Inventory
from trainctl.jobs.data_phase import stage_inputs
from trainctl.jobs.stack_run import StackRun


def stage_data_inputs(run: StackRun, inventory: Inventory, board: Callable[[Inventory], Any] | None) -> None:
    """The experiment's `data:` onto every node, after bootstrap (the stager's environment sits
    beside the job's), timed as its own phase."""
    if not run.exp.data:
        return
    with run.phase("data staging"):
        reporter = board(inventory) if board else None
        with reporter or contextlib.nullcontext():
            run.report.staged = stage_inputs(inventory, run.exp.data, run.report.run_dir / "logs" / "data",
                                             reaches_google=realizers.capabilities(run.spec).reaches_google,
                                             echo=run.echo, report=reporter)


def check_network(run: StackRun, inventory: Inventory) -> None:
    """The network pre-flight, where the experiment asks for it: before step 0."""
    section = run.exp.network_check
    if section is None:
        return
    from trainctl.jobs.network_check import preflight

    with run.phase("network check"):
        run.report.network = preflight(run.launcher, run.spec, inventory, run.run_id,
                                       run.report.run_dir / "logs" / "network-check", run.echo,
                                       min_fraction=section.min_fraction, below=section.below,
                                       size_mb=section.size_mb, iterations=section.iterations)
    if run.report.network is not None:  # kept with the run, beside timings.json
        (run.report.run_dir / "network.json").write_text(json.dumps(vars(run.report.network), indent=2))
