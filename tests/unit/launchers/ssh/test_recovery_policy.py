"""How a launch treats lost nodes, without nodes: capacity shortages are waited out with growing
pauses, nodes that went silent are asked about at the provider, and what a recovery redid is
read from the program's own lines."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from infra.errors import CapacityUnavailable, ProvisionError
from infra.providers.capacity_wait import CapacityWait
from infra.providers.inventory import Inventory
from trainctl.launchers.lines import LinePrinter
from trainctl.launchers.protocol import Recovery
from trainctl.launchers.result import LaunchResult, NodeOutcome, RecoveryRecord
from trainctl.launchers.ssh.attempt import wait_to_join
from trainctl.launchers.ssh.recovery import CAPACITY_BACKOFF_SECONDS, find_reclaimed, once_joined, recreate_with_backoff

INVENTORY = Inventory(stack="s", provider="local", bucket_uri="gs://b", nodes=(), ssh_private_key="",
                      known_hosts="")


def answering(*answers: Exception | Inventory) -> Recovery:
    """A provider's recreate that answers these in turn (raising the errors)."""
    left = list(answers)

    def recreate(nodes: list[str]) -> Inventory:
        answer = left.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return Recovery(lambda n: [], recreate)


def test_a_capacity_shortage_is_waited_out_with_growing_pauses() -> None:
    slept: list[float] = []
    said: list[str] = []
    recovery = answering(CapacityUnavailable("stockout"), CapacityUnavailable("stockout"), INVENTORY)
    inventory, tries = recreate_with_backoff(recovery, ["node1"], said.append, slept.append)
    assert (inventory, tries) == (INVENTORY, 3)
    assert slept == list(CAPACITY_BACKOFF_SECONDS[:2])
    assert "no capacity for node1 (stockout): trying again in 5 s" in said[0]


def test_a_capacity_shortage_waited_out_is_told_as_a_wait_on_the_lost_nodes() -> None:
    said: list[str] = []
    recreate_with_backoff(answering(CapacityUnavailable("stockout"), INVENTORY), ["node1"], said.append,
                          lambda s: None)
    waits = [line for line in said if isinstance(line, CapacityWait)]
    assert len(waits) == 1 and waits[0].nodes == ("node1",) and waits[0].ended >= waits[0].started
    assert "node1: 1 tries refused for capacity" in waits[0]


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
    ready: Future[Inventory] = Future()
    threading.Timer(0.3, ready.set_result, args=(INVENTORY,)).start()
    assert wait_to_join(ready, stopping) is INVENTORY  # it connects with the recreated node's keys

    never: Future[Inventory] = Future()
    threading.Timer(0.3, stopping.set).start()
    assert wait_to_join(never, stopping) is None  # the others failed meanwhile: it is not started

    failed: Future[Inventory] = Future()
    failed.set_exception(ProvisionError("bootstrap failed on node1"))
    with pytest.raises(ProvisionError, match="bootstrap failed"):
        wait_to_join(failed, threading.Event())


def test_a_recreated_node_joins_once_recreated_and_bootstrapped_and_either_failure_ends_it() -> None:
    recovered: Future = Future()
    bootstrapped: Future[None] = Future()
    joined = once_joined(recovered)
    recovered.set_result((INVENTORY, 2, bootstrapped))
    assert not joined.done()  # recreated, still being bootstrapped
    bootstrapped.set_result(None)
    assert joined.result(timeout=1) is INVENTORY

    no_capacity: Future = Future()
    joined = once_joined(no_capacity)
    no_capacity.set_exception(CapacityUnavailable("stockout"))
    with pytest.raises(CapacityUnavailable):
        joined.result(timeout=1)

    broken: Future[None] = Future()
    recovered = Future()
    joined = once_joined(recovered)
    recovered.set_result((INVENTORY, 1, broken))
    broken.set_exception(ProvisionError("bootstrap failed on node1"))
    with pytest.raises(ProvisionError, match="bootstrap failed"):
        joined.result(timeout=1)


def _recovering_launch(monkeypatch, tmp_path, keeps_addresses: bool, lost: str = "node1", moved: bool = False) -> dict:
    """A launch whose first attempt loses node1 to a preemption; the fake second attempt records
    what it was started with and whether node1 had been recreated by then. `moved`: the recovery
    brings the whole cluster up in another zone (every node a new machine)."""
    from trainctl.launchers.ssh import supervisor as launch_mod
    from trainctl.launchers.spec import LaunchSpec
    from trainctl.launchers.ssh.supervisor import launch

    from infra.providers.inventory import Node

    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOgJp3Gd3xmdD3fy5IHpfpCFk5tRCAzkj1xxYXfLSG6E"
    before = INVENTORY.model_copy(update={"nodes": tuple(
        Node(name=f"node{i}", rank=i, internal_ip=f"10.0.0.{i + 1}", ssh_host=f"10.0.0.{i + 1}",
             host_keys=(key,), workdir="/w") for i in range(2))})
    repaired = before.model_copy(update={"known_hosts": "/repaired/known_hosts"})
    if moved:
        before = before.model_copy(update={"placement": ({"zone": "us-central1-a", "outcome": "up"},)})
        repaired = repaired.model_copy(update={
            "nodes": tuple(n.model_copy(update={"ssh_host": f"10.1.0.{n.rank + 1}"}) for n in before.nodes),
            "placement": before.placement + ({"zone": "us-central1-c", "outcome": "up", "recovery": True},)})
    release = threading.Event()
    seen: dict = {}

    def recreate(nodes: list[str]) -> Inventory:
        release.wait(10)
        seen["recreated"] = True
        return repaired

    def launch_once(inventory, spec, log_dir, echo, attempt, cancel=None, on_lost=lambda _: None, joining=None,
                    commands=None):
        if attempt == 0:
            outcomes = [NodeOutcome(f"node{i}", i, exit_code=143, collateral=True) for i in range(2)]
            for o in outcomes:
                if o.node == lost:
                    o.preempted, o.lost_at, o.collateral = True, 1.0, False
            on_lost([lost])
            return LaunchResult(spec.run_id, outcomes)
        seen.update(inventory=inventory, recreated_at_start=seen.get("recreated", False), joining=dict(joining or {}))
        release.set()
        if joining:
            seen["joined"] = joining[lost].result(timeout=10)
        return LaunchResult(spec.run_id, [NodeOutcome("node0", 0, exit_code=0), NodeOutcome("node1", 1, exit_code=0)])

    monkeypatch.setattr(launch_mod, "launch_once", launch_once)
    if not keeps_addresses or lost == "node0":
        release.set()  # nothing waits for the survivors: the recreation may finish first
    recovery = Recovery(lambda n: n, recreate, lambda _inventory, nodes: seen.update(bootstrapped=nodes),
                        keeps_addresses=keeps_addresses)
    result = launch(before, LaunchSpec(run_id="r", command=("python", "t.py")), tmp_path,
                    echo=lambda _: None, recovery=recovery)
    seen.update(result=result, before=before)
    return seen


def test_survivors_start_before_the_recreation_where_addresses_are_kept(monkeypatch, tmp_path) -> None:
    seen = _recovering_launch(monkeypatch, tmp_path, keeps_addresses=True)
    assert seen["recreated_at_start"] is False  # the survivors did not wait for node1
    assert seen["inventory"] is seen["before"] and seen["joined"].known_hosts == "/repaired/known_hosts"
    record = seen["result"].recoveries[0]  # node1 joined with the recreated node's keys
    assert seen["result"].ok and record.tries == 1 and record.resumed_at > record.lost_at


def test_survivors_wait_for_the_new_addresses_where_a_recreated_node_gets_new_ones(monkeypatch, tmp_path) -> None:
    seen = _recovering_launch(monkeypatch, tmp_path, keeps_addresses=False)
    assert seen["recreated_at_start"] is True
    assert seen["inventory"].known_hosts == "/repaired/known_hosts"  # their commands name node1's new address
    assert seen["result"].ok


def test_survivors_wait_for_a_lost_rendezvous_host_and_all_start_together(monkeypatch, tmp_path) -> None:
    seen = _recovering_launch(monkeypatch, tmp_path, keeps_addresses=True, lost="node0")
    assert seen["recreated_at_start"] is True and seen["joining"] == {}
    assert seen["inventory"].known_hosts == "/repaired/known_hosts" and seen["result"].ok


def test_a_recovery_that_moved_the_cluster_bootstraps_every_node_and_starts_them_all_together(monkeypatch,
                                                                                            tmp_path) -> None:
    seen = _recovering_launch(monkeypatch, tmp_path, keeps_addresses=False, moved=True)
    assert seen["bootstrapped"] == ["node0", "node1"]  # the survivor is a new machine too
    assert seen["joining"] == {} and seen["inventory"].node("node0").ssh_host == "10.1.0.1"
    assert seen["result"].ok and seen["result"].recoveries[0].moved_to == "us-central1-c"


def test_a_recovery_in_place_bootstraps_the_lost_node_alone_and_records_no_move(monkeypatch, tmp_path) -> None:
    seen = _recovering_launch(monkeypatch, tmp_path, keeps_addresses=False)
    assert seen["bootstrapped"] == ["node1"] and seen["result"].recoveries[0].moved_to is None
