"""Spot preemption on request in the simulator: the guest is told, then after the grace period
the VM is stopped or deleted as its instanceTerminationAction says."""

from __future__ import annotations

from tests.fakes.sim_compute import PROJECT, ZONE, ComputeSim, csim, instance_body, make_csim  # noqa: F401

KEY = f"{PROJECT}/{ZONE}/spot-0"


def spot_vm(sim: ComputeSim, action: str) -> None:
    body = instance_body("spot-0", machine="g2-standard-8", spot=True)
    body["scheduling"]["instanceTerminationAction"] = action
    assert "error" not in sim.http("POST", sim.compute(f"zones/{ZONE}/instances"), body)[1]


def preempt(sim: ComputeSim, grace: float) -> tuple[int, dict]:
    return sim.http("POST", f"/trainctl-sim/v1/projects/{PROJECT}/zones/{ZONE}/instances/spot-0:preempt",
                    {"grace_seconds": grace})


def status(sim: ComputeSim) -> tuple[int, str | None]:
    code, body = sim.http("GET", sim.compute(f"zones/{ZONE}/instances/spot-0"))
    return code, body.get("status") if code == 200 else None


def test_a_preempted_spot_vm_is_told_then_stopped_after_the_grace_period(csim):
    csim.network()
    spot_vm(csim, "STOP")
    assert preempt(csim, 30)[0] == 200
    assert csim.backend.called("announce_preemption") == [KEY]
    assert status(csim) == (200, "RUNNING")  # the grace period: the guest's shutdown runs
    csim.advance(31)
    assert status(csim) == (200, "TERMINATED")
    assert csim.backend.called("stop") == [KEY]
    ops = csim.http("GET", csim.compute(f"zones/{ZONE}/operations"))[1]["items"]
    assert "compute.instances.preempted" in [op["operationType"] for op in ops]


def test_a_preempted_spot_vm_with_delete_action_is_gone(csim):
    csim.network()
    spot_vm(csim, "DELETE")
    preempt(csim, 5)
    csim.advance(6)
    assert status(csim)[0] == 404
    assert csim.backend.called("delete") == [KEY]
    assert csim.http("GET", csim.compute(f"zones/{ZONE}/disks/spot-0"))[0] == 404


def test_only_a_running_spot_vm_can_be_preempted(csim):
    csim.network()
    csim.http("POST", csim.compute(f"zones/{ZONE}/instances"), instance_body("std-0"))
    code, answer = csim.http("POST", f"/trainctl-sim/v1/projects/{PROJECT}/zones/{ZONE}/instances/std-0:preempt", {})
    assert code == 400 and "not Spot" in answer["error"]["message"]
    spot_vm(csim, "STOP")
    preempt(csim, 30)
    assert preempt(csim, 30)[0] == 400  # already being reclaimed


def test_a_preempted_spot_vm_whose_guest_has_shut_down_stops_then_not_at_the_grace_s_end(csim, monkeypatch):
    """The 30 s are a most (GCE forces the shutdown only when the guest OS has not finished by
    then): a guest whose programs ended on the SIGTERM is stopped at once, and the preemption's
    operation is done with it."""
    csim.network()
    spot_vm(csim, "STOP")
    shut: set[str] = set()
    monkeypatch.setattr(csim.backend, "shut_down", lambda key: key in shut, raising=False)
    assert preempt(csim, 30)[0] == 200
    assert status(csim) == (200, "RUNNING")  # its programs still run their shutdown
    shut.add(KEY)
    assert status(csim) == (200, "TERMINATED")
    assert csim.backend.called("stop") == [KEY]
    ops = csim.http("GET", csim.compute(f"zones/{ZONE}/operations"))[1]["items"]
    (op,) = [op for op in ops if op["operationType"] == "compute.instances.preempted"]
    assert op["status"] == "DONE"
