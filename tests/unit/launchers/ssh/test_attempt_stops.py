"""When an attempt ends at once, decided from what the nodes' agents and programs said (the
states as torchrun's lines set them; tests/unit/launchers/test_torchrun_agent_lines.py reads them from a real
torchrun, tests/e2e/test_failing_ranks.py runs the whole thing on the local stack)."""

from __future__ import annotations

from trainctl.launchers.ssh.attempt_stops import AttemptStops
from trainctl.launchers.result import NodeOutcome


def attempt(*names: str, permanent: tuple[int, ...] = (2,)) -> tuple[AttemptStops, dict[str, NodeOutcome], list[int]]:
    outcomes = {n: NodeOutcome(n, i, agent_state="running") for i, n in enumerate(names)}
    ended: list[int] = []
    return AttemptStops(outcomes, permanent, lambda: ended.append(1)), outcomes, ended


def fail(stops: AttemptStops, outcomes: dict[str, NodeOutcome], node: str, code: int, *lines: str) -> None:
    outcomes[node].worker_tail.extend(f"[{node} r1]:{line}" for line in lines)
    outcomes[node].agent_state = "failed"
    stops.worker_exited(node, code)


def test_a_failure_torchrun_can_restart_is_left_to_it_until_another_group_finishes():
    stops, outcomes, ended = attempt("node0", "node1", "node2")
    fail(stops, outcomes, "node1", 1, "epoch 3", "ValueError: nan loss")
    assert ended == []  # node0 and node2 still run: they join torchrun's restart
    outcomes["node2"].agent_state = "finished"
    stops.agents_changed()
    assert ended == [1] and stops.final is None  # the job may still be rerun
    assert stops.causes == {"node1": "its worker ended (exit code 1) after node2 finished: torchrun cannot "
                                     "restart a group whose other members have left"}
    assert stops.why([]) == f"node1: {stops.causes['node1']}"


def test_a_group_that_restarted_is_not_stranded_by_an_old_failure():
    stops, outcomes, ended = attempt("node0", "node1")
    fail(stops, outcomes, "node1", 1, "ValueError: nan loss")
    outcomes["node1"].agent_state = "running"  # "Starting worker group": every agent rejoined
    outcomes["node0"].agent_state = "finished"
    stops.agents_changed()
    assert ended == [] and stops.causes == {}


def test_a_failure_no_retry_can_fix_ends_the_attempt_at_once_and_for_good():
    stops, outcomes, ended = attempt("node0", "node1")
    fail(stops, outcomes, "node1", 1, "Traceback (most recent call last):", "ModuleNotFoundError: No module named 'wandb'")
    assert ended == [1] and stops.unfixable is not None
    assert stops.final is not None and stops.final.startswith("node1: ModuleNotFoundError: No module named 'wandb'")
    assert stops.why(["node0"]) == stops.final  # not a recovery's business either


def test_a_preemption_is_named_before_a_restart_it_made_impossible():
    stops, outcomes, _ = attempt("node0", "node1")
    fail(stops, outcomes, "node1", 143, "rank 1: stopping at step 40 (SIGTERM); checkpoint saved")
    outcomes["node0"].agent_state = "finished"
    stops.agents_changed()
    assert stops.final is None and stops.why(["node1"]) == "node1 preempted"


def test_a_permanent_exit_code_is_said_as_before():
    stops, outcomes, ended = attempt("node0", "node1")
    fail(stops, outcomes, "node1", 2, "usage: train.py [-h]")
    assert ended == [1] and stops.permanent == ("node1", 2)
    assert stops.why([]) == "permanent exit code 2 on node1"
