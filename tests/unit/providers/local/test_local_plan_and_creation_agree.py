"""The local plan is the declaration `up` creates from: every row the plan lists has the step
that makes it, no step makes what the plan does not list, and every row after the stack's own
directory becomes a state record `down` can remove. (tests/e2e/test_local_stack.py checks the
records of a real `up` against the plan.)"""

from __future__ import annotations

import itertools

import pytest

from infra.providers.local import registry
from infra.providers.local.create import STEPS
from infra.providers.local.plan import plan, record_of
from infra.providers.stack_home import state_dir
from infra.spec.stack_config import load_stack


@pytest.mark.parametrize("nodes", [1, 3])
@pytest.mark.parametrize("with_registry", [True, False])
def test_every_planned_role_has_one_creation_step_and_every_step_a_planned_role(
        monkeypatch: pytest.MonkeyPatch, nodes: int, with_registry: bool) -> None:
    monkeypatch.setattr(registry, "available", lambda: with_registry)
    roles = [row.values["role"] for row in plan(load_stack("local", name="agree", overrides={"nodes": nodes}))]
    unplanned = set(STEPS) - set(roles)
    assert set(roles) <= set(STEPS)
    assert unplanned == (set() if with_registry else {"registry"})
    # `create` runs one step over each run of rows of a role: a role split in two would boot
    # its nodes in two batches, or write hosts files after nodes that read them.
    runs = [role for role, _ in itertools.groupby(roles)]
    assert len(runs) == len(set(runs))
    assert roles.count("node") == roles.count("hosts") == nodes
    assert runs.index("hosts") < runs.index("node")


def test_each_row_after_the_stack_directory_records_what_down_removes_it_by() -> None:
    spec = load_stack("local", name="agree", overrides={"nodes": 2})
    first, *rows = plan(spec)
    assert (first.kind, first.name) == ("dir", str(state_dir("agree")))
    needs = {"bridge": {"name"}, "host_rule": {"rule"}, "netns": {"name", "veth"}, "dir": {"name"}}
    for row in rows:
        record = record_of(row)
        assert set(record) == needs[row.kind], row
        assert record.get("name", row.name) == row.name
