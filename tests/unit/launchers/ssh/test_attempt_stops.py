"""When an attempt ends at once, decided from what the nodes' agents and programs said (the
states as torchrun's lines set them; tests/unit/launchers/test_torchrun_agent_lines.py reads them from a real
torchrun, tests/e2e/test_failing_ranks.py runs the whole thing on the local stack)."""

from __future__ import annotations

from pathlib import Path

from trainctl.launchers.lines import LinePrinter
from trainctl.launchers.result import NodeOutcome
from trainctl.launchers.ssh.attempt_stops import AttemptStops


def attempt(*names: str, permanent: tuple[int, ...] = (2,)) -> tuple[AttemptStops, dict[str, NodeOutcome], list[int]]:
    outcomes = {n: NodeOutcome(n, i, agent_state="running") for i, n in enumerate(names)}
    ended: list[int] = []
    return AttemptStops(outcomes, permanent, lambda: ended.append(1)), outcomes, ended


def fail(stops: AttemptStops, outcomes: dict[str, NodeOutcome], node: str, code: int, *lines: str) -> None:
    """In LinePrinter's order: the exit is judged, then the agent's state says "failed"."""
    outcomes[node].worker_tail.extend(f"[{node} r1]:{line}" for line in lines)
    stops.worker_exited(node, code)
    outcomes[node].agent_state = "failed"
    stops.agents_changed()


def raced(tmp_path: Path, code: int, *lines: str) -> AttemptStops:
    """node1's lines, read by a real LinePrinter, while node0's group has finished: node0's
    thread looks at the agents at the worst moment, as node1's exit line comes in."""
    stops, outcomes, _ = attempt("node0", "node1")
    outcomes["node0"].agent_state = "finished"

    def exited(code: int) -> None:
        stops.agents_changed()  # node0's thread, in between
        stops.worker_exited("node1", code)

    printer = LinePrinter("node1", tmp_path / "node1.log", lambda line: None, outcomes["node1"], exited,
                          on_agent_change=stops.agents_changed)
    printer.write("".join(f"[node1 r1]:{line}\n" for line in lines)
                  + f"E1129 12:24:54.800000 55 torch/distributed/elastic/multiprocessing/api.py:1002] "
                    f"failed (exitcode: {code}) local_rank: 0 (pid: 74) of binary: /usr/bin/python3\n")
    printer.close()
    return stops


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


def test_a_stranded_failure_seen_from_another_nodes_thread_is_named_by_its_own_exit_code(tmp_path):
    stops = raced(tmp_path, -6, "rank 1 leaving")  # SIGABRT at interpreter exit
    assert stops.causes == {"node1": "its worker ended (killed by SIGABRT) after node0 finished: torchrun "
                                     "cannot restart a group whose other members have left"}
    assert stops.final is None  # a rerun may follow


def test_a_failure_no_retry_can_fix_keeps_its_verdict_when_another_group_finished_meanwhile(tmp_path):
    stops = raced(tmp_path, 1, "Traceback (most recent call last):", "ModuleNotFoundError: No module named 'wandb'")
    assert stops.unfixable is not None
    assert stops.final is not None and stops.final.startswith("node1: ModuleNotFoundError")  # no rerun


def test_once_the_attempt_is_stopping_no_worker_or_agent_is_judged():
    stops, outcomes, ended = attempt("node0", "node1", "node2")
    outcomes["node0"].agent_state = "finished"
    stops.stopping.set()  # node2's failure stops the others; their workers die of the stop
    fail(stops, outcomes, "node1", -15, "rank 1: stopping (SIGTERM)")
    fail(stops, outcomes, "node1", 2, "usage: train.py [-h]")
    assert ended == [] and stops.causes == {} and stops.permanent is None
