"""Waits for capacity, as the realizer and the launcher tell them, are their own interval kind
on the nodes that waited, taken out of provisioning or recovery, and cost nothing: the nodes
did not exist yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.providers.capacity_wait import CapacityWait
from infra.spec.ledger import NodeRate
from trainctl.jobs.ledger_build import build_ledger
from trainctl.jobs.stack_run import RunReport, keeping_waits
from trainctl.launchers.result import RecoveryRecord

NODES = ("node0", "node1")
RATES = tuple(NodeRate(name=n, capacity="on-demand", usd_per_hour=3.6, on_demand_usd_per_hour=3.6) for n in NODES)


def lane(ledger, node: str) -> list[tuple[str, float, float]]:
    return [(i.kind, i.start, i.end) for i in ledger.intervals if node in i.nodes]


def test_a_wait_while_the_stack_comes_up_is_its_own_kind_and_costs_nothing(tmp_path: Path):
    granted = CapacityWait("flex-start: the VMs waited 0m10s in PENDING", 5, 15)  # names no node: all
    ledger = build_ledger("r", RATES, 0.0, {"up": (0, 20), "down": (20, 25)}, tmp_path, "node0", waits=[granted])
    assert lane(ledger, "node1") == [("provisioning", 0, 5), ("waiting_for_capacity", 5, 15),
                                     ("provisioning", 15, 20), ("teardown", 20, 25)]
    assert ledger.usd_by_kind["waiting_for_capacity"] == 0
    assert ledger.total_usd == pytest.approx(2 * 15 * 0.001)  # the 25 s less the 10 s nobody was billed for
    assert ledger.badput["waiting_for_capacity"] == pytest.approx(10 / 25)


def test_a_preempted_node_waiting_to_be_recreated_waits_alone_while_the_others_recover(tmp_path: Path):
    lost = RecoveryRecord(["node1"], lost_at=12, resumed_at=30, tries=3, furthest_step=None)
    wait = CapacityWait("node1: 2 tries refused for capacity over 10 s", 14, 24, ("node1",))
    ledger = build_ledger("r", RATES, 0.0, {"train": (10, 40)}, tmp_path, "node0", [lost], waits=[wait])
    assert ("waiting_for_capacity", 14, 24) in lane(ledger, "node1")
    assert "waiting_for_capacity" not in {kind for kind, _, _ in lane(ledger, "node0")}
    assert all(ledger.lane_seconds(n) == 30 for n in NODES)
    assert ledger.total_usd == pytest.approx((2 * 30 - 10) * 0.001)


def test_a_run_keeps_the_waits_its_realizer_tells_and_says_every_line():
    report, shown = RunReport("r", Path("runs/r")), []
    progress = keeping_waits(report, shown.append, "[trainctl] ")
    progress("zone us-central1-b: placing all 2 node(s) here")
    progress(CapacityWait("zone us-central1-a: no capacity after 3.0 s", 1, 4))
    assert shown == ["[trainctl] zone us-central1-b: placing all 2 node(s) here",
                     "[trainctl] zone us-central1-a: no capacity after 3.0 s"]
    assert [(w.started, w.ended) for w in report.capacity_waits] == [(1, 4)]
