"""A GKE sweep's trials run as pods (their lanes pod0, pod1 …) on the node pool's nodes: each
pod is priced as a node of its pool, on a node lane of its own while trials overlap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.spec.ledger import NodeRate
from trainctl.jobs.ledger_build import TrialWindow, build_ledger

NODES = ("gke-pool-0", "gke-pool-1", "gke-pool-2", "gke-pool-3")
RATES = tuple(NodeRate(name=n, capacity="on-demand", usd_per_hour=3.6, on_demand_usd_per_hour=3.6) for n in NODES)


def pod_trial(tmp_path: Path, number: int, pods: int, window: tuple[float, float]) -> TrialWindow:
    logs = tmp_path / f"trial-{number}" / "logs"
    logs.mkdir(parents=True)
    for index in range(pods):
        (logs / f"pod{index}.log").write_text("")
    a, b = window
    (logs / "pod0.steps.jsonl").write_text(json.dumps({"t": a + 2, "step": 10}) + "\n"
                                           + json.dumps({"t": b - 1, "step": 20}) + "\n")
    return TrialWindow(number, "COMPLETE", 0.5, a, b, logs)


def test_a_gke_trials_pods_are_priced_as_their_pools_nodes(tmp_path: Path):
    trials = [pod_trial(tmp_path, 0, 2, (10, 30)), pod_trial(tmp_path, 1, 2, (30, 40))]
    ledger = build_ledger("s", RATES[:2], 0.0, {"up": (0, 10), "sweep": (10, 40), "down": (40, 45)},
                          tmp_path / "logs", "gke-pool-0", (), trials)
    # 2 pods x 20 s and 2 pods x 10 s at $3.60 an hour ($0.001 a second) each
    assert [t.usd for t in ledger.trials] == pytest.approx([0.04, 0.02])
    assert ledger.seconds_by_kind().get("idle", 0) == 0  # the pods' time is on the nodes' lanes
    assert ledger.total_usd == pytest.approx(2 * 45 * 0.001)  # every node once over the wall time


def test_overlapping_gke_trials_take_separate_nodes(tmp_path: Path):
    trials = [pod_trial(tmp_path, 0, 2, (10, 30)), pod_trial(tmp_path, 1, 2, (12, 30))]
    ledger = build_ledger("s", RATES, 0.0, {"sweep": (10, 30)}, tmp_path / "logs", "gke-pool-0", (), trials)
    lanes = {n: {i.note for i in ledger.intervals if n in i.nodes and i.kind != "idle"} for n in NODES}
    assert lanes == {"gke-pool-0": {"trial 0"}, "gke-pool-1": {"trial 0"},
                     "gke-pool-2": {"trial 1"}, "gke-pool-3": {"trial 1"}}
    assert all(ledger.lane_seconds(n) == 20 for n in NODES)
