"""Ranks that resume from different points are told apart from a failure a rerun may fix: the
lines are those PyTorch's DDP tutorial (pytorch/examples distributed/ddp-tutorial-series/
multinode.py) prints, its snapshot a relative file only rank 0 writes, after torchrun restarted
the group that lost a worker (its agent's "Starting worker group" line)."""

from __future__ import annotations

from pathlib import Path

from trainctl.launchers.lines import LinePrinter
from trainctl.launchers.result import LaunchResult, NodeOutcome

STARTED = "I1207 23:58:01.000000 4242 torch/distributed/elastic/agent/server/api.py:700] [default] Starting worker group"


def tutorial_node(node: str, rank: int, restarted: list[str], tmp_path: Path) -> NodeOutcome:
    first = [STARTED, "Running on device cpu", f"[GPU{rank}] Epoch 0 | Batchsize: 32 | Steps: 22",
             f"[GPU{rank}] Epoch 1 | Batchsize: 32 | Steps: 22"]
    text = [f"{line}\n" if line.startswith("I1") else f"[{node} r{rank}]:{line}\n" for line in first + [STARTED] + restarted]
    outcome = NodeOutcome(node, rank)
    printer = LinePrinter(node, tmp_path / f"{node}.log", lambda _line: None, outcome,
                          lambda _code: None, on_agent_change=lambda: None)
    printer.write("".join(text))
    printer.close()
    return outcome


def test_ranks_resumed_from_different_epochs_are_not_rerun(tmp_path):
    outcomes = [tutorial_node("node0", 0, ["Running on device cpu", "Loading snapshot",
                                           "Resuming training from snapshot at Epoch 1",
                                           "[GPU0] Epoch 1 | Batchsize: 32 | Steps: 22"], tmp_path),
                *[tutorial_node(f"node{i}", i, ["Running on device cpu",
                                                f"[GPU{i}] Epoch 0 | Batchsize: 32 | Steps: 22"], tmp_path)
                  for i in (1, 2)]]
    why = LaunchResult("r", outcomes).why_no_rerun(())
    assert why is not None and "resumed from different points (node1, node2 at epoch 0; node0 at epoch 1)" in why
    assert "`shared_dir: {links: [snapshot.pt]}`" in why  # the experiment option that fixes it
    assert "{job_dir}" in why and why.endswith("no rerun")


def test_ranks_that_resume_together_or_start_afresh_may_be_rerun(tmp_path):
    together = [tutorial_node(f"node{i}", i, ["Loading snapshot", "Resuming training from snapshot at Epoch 1"],
                              tmp_path) for i in range(3)]
    assert LaunchResult("r", together).diverged_starts() is None
    # the first group's start (epoch 0 everywhere) is not the restarted group's
    afresh = [tutorial_node(f"node{i}", i, [f"[GPU{i}] Epoch 0 | Batchsize: 32 | Steps: 22"], tmp_path)
              for i in range(2)]
    assert LaunchResult("r", afresh).diverged_starts() is None
    # programs whose ranks print different units (one epochs, one steps) are not compared
    mixed = [NodeOutcome("node0", 0, start=("epoch", 2, True)), NodeOutcome("node1", 1, start=("step", 40, False))]
    assert LaunchResult("r", mixed).diverged_starts() is None
