"""When a sweep's first trials all failed the same way no retry can fix, no further trial starts;
first trials that differ, or one that succeeded, keep it going."""

from __future__ import annotations

import pytest

from trainctl.launchers.failures import Failure
from trainctl.jobs.sweep import FIRST_TRIALS, FirstTrials


MISSING = Failure("ModuleNotFoundError: No module named 'wandb'", "module wandb is not installed on the nodes")


def test_the_first_trials_failing_the_same_way_stop_the_sweep():
    first = FirstTrials(succeeded_before=False)
    assert [first.record(MISSING) for _ in range(FIRST_TRIALS)] == [False] * (FIRST_TRIALS - 1) + [True]
    assert first.halted is MISSING
    assert first.record(MISSING) is False  # a trial that was in flight: said once


@pytest.mark.parametrize("ends, before", [
    ([MISSING, None, MISSING, MISSING], False),  # a trial succeeded: the failure depends on the parameters
    ([MISSING, MISSING, MISSING], True),  # ...in an earlier run of this sweep, resumed now
    ([MISSING, Failure("exit code 1"), MISSING, MISSING], False),  # not the same failure
])
def test_first_trials_that_differ_or_a_trial_that_succeeded_keep_the_sweep_going(ends, before):
    first = FirstTrials(succeeded_before=before)
    assert not any(first.record(end) for end in ends)
    assert first.halted is None


def test_a_trial_in_flight_that_succeeds_after_all_lifts_the_halt():
    first = FirstTrials(succeeded_before=False)
    for _ in range(FIRST_TRIALS):
        first.record(MISSING)
    first.record(None)
    assert first.halted is None
