"""Budgets are checked before anything exists: `plan`, `up` and `run` refuse (exit 2) a cluster
whose list price an hour is over max_usd_per_hour, naming the price, the budget and where it was
set; a budget whose max_usd would not even pay for the stop is refused; a plan within budget says
how long max_usd lasts."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import REPO, trainctl
from infra.spec.budget import STOP_RESERVE_SECONDS, Budget, affordable, parse_budget_option, spend_seconds
from infra.errors import ConfigError

CI = {"COLUMNS": "", "TERMINAL_WIDTH": ""}


def stack_file(tmp_path: Path, budget: str = "") -> Path:
    """A local stack whose two nodes stand in for n1-standard-4 VMs ($0.19/hour each and a $0.03/hour disk, listed)."""
    path = tmp_path / "Pulumi.budgeted.yaml"
    path.write_text(textwrap.dedent("""\
        config:
          trainctl:provider: local
          trainctl:nodes: 2
          trainctl:machine_type: n1-standard-4
        """) + budget)
    return path


def test_plan_refuses_a_gcp_stack_over_the_hourly_budget_given_as_a_flag():
    done = trainctl("plan", "--stack", "gpu-t4x2", "--budget", "max_usd_per_hour=0.5", env=CI)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # no plan printed: refused
    said = " ".join(done.stderr.split())
    assert "stack gpu-t4x2 costs $1.11/hour at list prices" in said, said
    assert "2 x T4 $0.70" in said and "over its budget's max_usd_per_hour $0.5 (--budget)" in said


def test_plan_refuses_a_stack_file_whose_own_budget_its_price_exceeds(tmp_path):
    path = stack_file(tmp_path, "  trainctl:budget: {max_usd_per_hour: 0.2}\n")
    done = trainctl("plan", "--stack", str(path), env=CI)
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert "costs $0.43/hour" in said and "max_usd_per_hour $0.2" in said, said
    assert f"trainctl:budget in {path}" in said


def test_a_plan_within_budget_says_how_long_max_usd_lasts(tmp_path):
    path = stack_file(tmp_path, "  trainctl:budget: {max_usd: 1.1, max_usd_per_hour: 0.5}\n")
    done = trainctl("plan", "--stack", str(path), env=CI)
    assert done.returncode == 0, done.stderr
    assert "estimated $0.43/hour" in done.stdout
    assert "budget max_usd $1.1 pays for 2.56 h of this stack" in done.stdout


def test_run_refuses_an_experiment_over_its_hourly_budget_before_anything_exists(tmp_path):
    exp = tmp_path / "exp.yaml"
    exp.write_text(textwrap.dedent(f"""\
        name: over-budget
        stack: {stack_file(tmp_path)}
        code: {REPO}
        run: {{command: python -m trainers.digits_ddp}}
        budget: {{max_usd_per_hour: 0.1}}
        """))
    done = trainctl("run", str(exp), env={**CI, "TRAINCTL_HOME": str(tmp_path / "home")})
    assert done.returncode == 2, done.stderr
    assert f"({exp}: budget)" in " ".join(done.stderr.split())
    assert not (tmp_path / "home" / "stacks").exists()  # nothing was created
    flagged = trainctl("run", str(exp), "--budget", "max_usd=0.001",
                       env={**CI, "TRAINCTL_HOME": str(tmp_path / "home")})
    assert flagged.returncode == 2, flagged.stderr
    said = " ".join(flagged.stderr.split())
    assert "max_usd $0.001 (--budget) pays for 8 s" in said and "less than stopping it takes" in said, said


@pytest.mark.parametrize("value, wrong", [
    ("max_usd=-1", "max_usd: Input should be greater than 0"),
    ("max_usd=lots", "max_usd: Input should be a valid number"),
    ("max_dollars=5", "max_dollars: Extra inputs are not permitted"),
    (",", "a budget needs max_usd, max_usd_per_hour or both"),
])
def test_a_budget_flag_that_is_not_one_is_named_with_the_fix(value, wrong):
    with pytest.raises(ConfigError) as refused:
        parse_budget_option(value)
    assert wrong in str(refused.value) and "max_usd=USD,max_usd_per_hour=USD" in str(refused.value)


def test_max_usd_lasts_until_only_the_stop_is_left_to_pay_for():
    budget = Budget(max_usd=1.0)
    assert spend_seconds(budget, per_hour=2.0) == 1800 - STOP_RESERVE_SECONDS
    assert spend_seconds(budget, per_hour=0.0) is None  # a stack that costs nothing is never stopped
    assert spend_seconds(Budget(max_usd_per_hour=3), per_hour=2.0) is None
    assert affordable(budget, 2.0, elapsed=1000, next_seconds=700)
    assert not affordable(budget, 2.0, elapsed=1000, next_seconds=800)
