"""What `trainctl run` says after a run, built from its report and ledger objects (no run): every
figure true to what the run knew (issue 48: "resumed from step None", a simulated project's run
said to be the local stack's)."""

from __future__ import annotations

from trainctl.cli.run_output import recovery_line
from trainctl.launchers.result import RecoveryRecord


def test_a_recovery_of_a_program_that_printed_no_steps_names_no_step_none():
    quiet = RecoveryRecord(["node1"], lost_at=10, resumed_at=44, tries=1, furthest_step=None)
    line = recovery_line(1, quiet)
    assert "None" not in line and "34.0 s" in line and "printed no steps" in line
    unsaid = RecoveryRecord(["node1"], lost_at=10, resumed_at=44, tries=1, furthest_step=30)
    assert "None" not in recovery_line(1, unsaid) and "no step it resumed from" in recovery_line(1, unsaid)
    resumed = RecoveryRecord(["node1"], lost_at=10, resumed_at=44, tries=2, furthest_step=30, resumed_from_step=20)
    assert recovery_line(2, resumed).endswith("after 2 tries (no capacity); resumed from step 20, 10 step(s) redone")
