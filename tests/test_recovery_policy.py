"""How a launch treats lost nodes, without nodes: capacity shortages are waited out with growing
pauses, nodes that went silent are asked about at the provider, and what a recovery redid is
read from the program's own lines."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from infra.errors import CapacityUnavailable, ProvisionError
from infra.inventory import Inventory
from trainctl.launch import (
    CAPACITY_BACKOFF_SECONDS,
    LaunchResult,
    LinePrinter,
    NodeOutcome,
    Recovery,
    RecoveryRecord,
    find_reclaimed,
    recreate_with_backoff,
    wait_to_join,
)

INVENTORY = Inventory(stack="s", provider="local", bucket_uri="gs://b", nodes=(), ssh_private_key="",
                      known_hosts="")


def test_a_capacity_shortage_is_waited_out_with_growing_pauses() -> None:
    answers: list[Exception | Inventory] = [CapacityUnavailable("stockout"), CapacityUnavailable("stockout"),
                                            INVENTORY]
    slept: list[float] = []
    said: list[str] = []

    def recreate(nodes: list[str]) -> Inventory:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    inventory, tries = recreate_with_backoff(Recovery(lambda n: [], recreate), ["node1"], said.append, slept.append)
    assert (inventory, tries) == (INVENTORY, 3)
    assert slept == list(CAPACITY_BACKOFF_SECONDS[:2])
    assert "no capacity for node1 (stockout): trying again in 5 s" in said[0]


def test_other_provisioning_errors_are_not_retried() -> None:
    def recreate(nodes: list[str]) -> Inventory:
        raise ProvisionError("quota exceeded")

    with pytest.raises(ProvisionError, match="quota"):
        recreate_with_backoff(Recovery(lambda n: [], recreate), ["node1"], print, lambda s: None)


def test_the_pause_stops_growing_at_its_cap() -> None:
    slept: list[float] = []
    left = [CapacityUnavailable("x")] * 10

    def recreate(nodes: list[str]) -> Inventory:
        if left:
            raise left.pop()
        return INVENTORY

    recreate_with_backoff(Recovery(lambda n: [], recreate), ["n"], lambda _m: None, slept.append)
    assert slept[-1] == slept[-2] == CAPACITY_BACKOFF_SECONDS[-1]


def test_a_silent_node_the_provider_stopped_is_a_preemption_a_crashed_program_is_not() -> None:
    silent = NodeOutcome("node1", 1, exit_code=-1, error="node lost: no SSH heartbeat")
    crashed = NodeOutcome("node2", 2, exit_code=1)
    result = LaunchResult("r", [NodeOutcome("node0", 0, exit_code=0), silent, crashed])
    asked: list[list[str]] = []

    def reclaimed(nodes: list[str]) -> list[str]:
        asked.append(nodes)
        return ["node1"]

    said: list[str] = []
    find_reclaimed(result, Recovery(reclaimed, lambda n: INVENTORY), said.append)
    assert asked == [["node1"]]  # only the node that went silent is asked about
    assert result.preempted() == ["node1"] and silent.lost_at is not None
    assert "node1: reclaimed: the provider stopped or deleted its VM" in said[0]


def test_when_the_provider_cannot_say_the_loss_stays_a_failure() -> None:
    silent = NodeOutcome("node1", 1, exit_code=-1)

    def reclaimed(nodes: list[str]) -> list[str]:
        raise RuntimeError("API unreachable")

    said: list[str] = []
    find_reclaimed(LaunchResult("r", [silent]), Recovery(reclaimed, lambda n: INVENTORY), said.append)
    assert not silent.preempted and "could not ask the provider about node1" in said[0]


def test_steps_redone_come_from_the_programs_own_lines(tmp_path) -> None:
    before, after = NodeOutcome("node0", 0), NodeOutcome("node0", 0)
    for outcome, lines in ((before, ["epoch 1/6 loss 0.5 test_acc 0.9 step 46", "rank 0: stopping at step 61 (SIGTERM)"]),
                           (after, ["rank 0: resumed from epoch 1 batch 15 (step 61)", "epoch 2/6 step 92"])):
        printer = LinePrinter("node0", tmp_path / f"{id(outcome)}.log", lambda _l: None, outcome)
        printer.write("".join(f"[node0 r0]:{line}\n" for line in lines))
        printer.close()
    assert (before.last_step, before.resumed_step) == (61, None)
    assert after.resumed_step == 61
    record = RecoveryRecord(["node1"], lost_at=100.0, resumed_at=112.5, tries=1,
                            furthest_step=LaunchResult("r", [before]).last_step(),
                            resumed_from_step=LaunchResult("r", [after]).resumed_step())
    assert (record.steps_redone, record.seconds) == (0, 12.5)
    assert RecoveryRecord(["n"], 0, 1, 1, furthest_step=None).steps_redone is None  # a silent program


def test_a_node_joining_late_starts_when_bootstrapped_never_once_the_run_stops() -> None:
    stopping = threading.Event()
    ready: Future[None] = Future()
    threading.Timer(0.3, ready.set_result, args=(None,)).start()
    assert wait_to_join(ready, stopping) is True

    never: Future[None] = Future()
    threading.Timer(0.3, stopping.set).start()
    assert wait_to_join(never, stopping) is False  # the others failed meanwhile: it is not started

    failed: Future[None] = Future()
    failed.set_exception(ProvisionError("bootstrap failed on node1"))
    with pytest.raises(ProvisionError, match="bootstrap failed"):
        wait_to_join(failed, threading.Event())
