"""A run's ledger (infra/spec/ledger.py) made from what the run recorded: shared beside the
checkpoints while the bucket is still there, kept in runs/<run>/ however the run ended. Making it
never changes how a run ends: a ledger that cannot be made only warns."""

from __future__ import annotations

import warnings

from infra.spec.ledger import Ledger
from trainctl.jobs import ledger_record
from trainctl.jobs.stack_run import StackRun


def account(run: StackRun) -> Ledger | None:
    """The run's ledger as far as it went."""
    report = run.report
    return ledger_record.run_ledger(run.run_id, report.run_dir, run.spec, run.inventory, report.windows,
                                    report.result, run.exp.sweep.metric if run.exp.sweep else None,
                                    report.bootstrapped, report.capacity_waits)


def share_ledger(run: StackRun) -> None:
    """The ledger so far beside the checkpoints, while the bucket is still there."""
    try:
        ledger = account(run)
    except Exception as exc:  # noqa: BLE001 - accounting never changes how a run ends
        warnings.warn(f"could not account for {run.run_id}: {type(exc).__name__}: {exc}", stacklevel=2)
        return
    if ledger is not None and run.inventory is not None:
        ledger_record.upload(ledger, run.inventory)


def keep_ledger(run: StackRun) -> None:
    """runs/<run>/ledger.json and timeline.png, however the run ended; a ledger that cannot be
    made only warns: the run's outcome stands."""
    try:
        run.report.ledger = account(run)
        if run.report.ledger is not None:
            ledger_record.keep(run.report.ledger, run.report.run_dir)
    except Exception as exc:  # noqa: BLE001 - accounting never changes how a run ended
        warnings.warn(f"could not write the ledger of {run.run_id}: {type(exc).__name__}: {exc}", stacklevel=2)
