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


def test_a_simulated_projects_spot_saving_says_it_is_simulated_not_the_local_stack(monkeypatch, tmp_path):
    from infra.providers import realizers
    from infra.providers.gcp import private_endpoints
    from infra.spec.stack_config import load_stack
    from trainctl.cli.run_output import spot_saving_line
    from trainctl.jobs.stack_run import RunReport

    spot = load_stack("gpu-l4-spot")
    monkeypatch.setattr(private_endpoints, "_in_use", None)
    assert realizers.capabilities(spot).unbilled is None  # Google bills it
    assert "local stack" in realizers.capabilities(load_stack("local")).unbilled
    simulated = private_endpoints.PrivateEndpoints(api="http://127.0.0.1:9", machines=private_endpoints.Machines(
        accelerators=False, on_this_host=True))
    monkeypatch.setattr(private_endpoints, "_in_use", simulated)
    unbilled = realizers.capabilities(spot).unbilled
    line = spot_saving_line(RunReport("r", tmp_path, phases={"train": 149.0}, spot_saving_usd=0.0, unbilled=unbilled))
    assert "simulated project" in line and "local stack" not in line


def test_dollar_amounts_keep_two_significant_digits_below_a_dollar():
    from trainctl.cli.output import usd

    assert [usd(x) for x in (0.0, 0.0042, 0.04249, 0.42, 0.996, 12.345, 1234.5)] == [
        "$0.00", "$0.0042", "$0.042", "$0.42", "$1.00", "$12.35", "$1,234.50"]


def test_a_spot_saving_is_shown_rounded_to_what_it_is_and_says_what_priced_it(tmp_path):
    """Issue 48: a 149 s spot run's saving was "$0.00" (rounded to the cent), priced from nowhere said."""
    from infra.spec.ledger import Interval, Ledger, NodeRate
    from infra.spec.stack_config import load_stack
    from trainctl.cli.ledger_output import summary_lines
    from trainctl.cli.run_output import spot_saving_line
    from trainctl.jobs.experiment import spot_saving
    from trainctl.jobs.stack_run import RunReport

    saving = spot_saving(load_stack("gpu-l4-spot"), 149.0)
    assert 0 < saving < 0.1 and saving != round(saving, 2)  # under a dollar, kept to its digits
    line = spot_saving_line(RunReport("r", tmp_path, phases={"train": 149.0}, spot_saving_usd=saving))
    assert "$0.00" not in line and "catalog list prices (us-central1" in line, line
    nodes = ("node0",)
    ledger = Ledger(run_id="r", started=0, ended=149, intervals=(Interval(kind="idle", start=0, end=149, nodes=nodes),),
                    nodes=(NodeRate(name="node0", capacity="spot", usd_per_hour=0.3, on_demand_usd_per_hour=0.85),))
    spot = [line for line in summary_lines(ledger) if line.startswith("spot saved")][0]
    assert spot.startswith("spot saved $0.023 over the whole run") and "catalog list prices" in spot, spot
    local = spot_saving_line(RunReport("r", tmp_path, phases={"train": 9.0}, spot_saving_usd=0.0,
                                       unbilled="local stack: its nodes are namespaces of this machine, nothing is billed"))
    assert local.endswith("$0.00 (local stack: its nodes are namespaces of this machine, nothing is billed)")
