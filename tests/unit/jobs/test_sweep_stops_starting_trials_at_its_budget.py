"""A sweep starts no trial its budget cannot pay for, were it as long as its longest trial so far,
with the stop still paid for; it says which one it did not start. Without a budget, or before any
trial has finished, trials start."""

from __future__ import annotations

import time

from infra.spec.budget import STOP_RESERVE_SECONDS, Budget
from trainctl.jobs.experiment_spec import Parameter, SweepSection
from trainctl.jobs.spending import Spending
from trainctl.jobs.sweep import TrialClock, TrialResult, write_results

PER_HOUR = 3.6  # a dollar buys 1000 s


def spending_after(elapsed: float, said: list[str]) -> Spending:
    spending = Spending(Budget(max_usd=1.0), PER_HOUR, said.append)
    spending._started = time.monotonic() - elapsed  # the stack came up `elapsed` seconds ago
    return spending


def test_a_trial_that_would_run_past_what_the_budget_pays_for_is_not_started_and_said():
    said: list[str] = []
    limit = 1000 - STOP_RESERVE_SECONDS
    clock = TrialClock(spending_after(limit - 100, said))
    clock.seconds = [60.0, 90.0]
    assert clock.affords_next("trial 5")  # 90 s more still ends before the stop must begin
    clock.seconds.append(120.0)
    assert not clock.affords_next("trial 6")
    assert clock.spending is not None and clock.spending.declined == ["trial 6"]
    assert said and "not starting trial 6: another 120 s" in said[-1]


def test_trials_start_without_a_budget_and_before_any_has_taken_time():
    assert TrialClock(None).affords_next("trial 1")
    said: list[str] = []
    assert TrialClock(spending_after(900, said)).affords_next("trial 1")  # nothing known yet
    assert said == []


def test_once_the_budget_has_run_out_no_trial_starts_and_none_is_said_declined():
    said: list[str] = []
    spending = spending_after(0, said)
    spending.reached.set()  # the stop has begun: trials in flight are being stopped
    clock = TrialClock(spending)
    assert not clock.affords_next("trial 3") and spending.declined == []


def test_the_budget_running_out_while_trials_run_or_their_results_are_written_interrupts_nothing(monkeypatch):
    """The sweep's results (trials.csv, best.json, best/) are written under TrialClock.running():
    a budget that ran out just then once left a sweep without best/."""
    interrupted: list[str] = []
    monkeypatch.setattr("trainctl.jobs.spending.interrupt_main", interrupted.append)
    said: list[str] = []
    spending = spending_after(0, said)
    with TrialClock(spending).running():
        spending._reach()  # the budget's timer
    assert interrupted == [] and spending.reached.is_set()
    spending_after(0, said)._reach()  # outside it, between phases, the run is interrupted
    assert interrupted == ["budget reached"]


def test_the_best_trials_artifacts_are_written_with_the_results(tmp_path):
    for number, accuracy in ((0, 0.91), (1, 0.95)):
        (tmp_path / f"trial-{number}" / "logs").mkdir(parents=True)
        (tmp_path / f"trial-{number}" / "metrics.json").write_text(f'{{"test_accuracy": {accuracy}}}')
    sweep = SweepSection(parameters=(Parameter(name="lr", type="DOUBLE", min=0.01, max=0.1),))
    results = [TrialResult(number=n, params={"lr": 0.01 * (n + 1)}, value=v, state="COMPLETE", run_id=f"s-t{n}")
               for n, v in ((0, 0.91), (1, 0.95))]
    write_results(results, sweep, tmp_path)
    assert (tmp_path / "best" / "metrics.json").read_text() == '{"test_accuracy": 0.95}'
    assert not (tmp_path / "best" / "logs").exists()
