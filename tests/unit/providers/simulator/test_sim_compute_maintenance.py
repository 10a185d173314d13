"""Host maintenance on request in the simulator: the guest is told ahead, as the VM's
onHostMaintenance says; after the notice a migrating VM goes on and a terminating one (every GPU
VM) is stopped."""

from __future__ import annotations

from tests.fakes.sim_compute import PROJECT, ZONE, ComputeSim, csim, instance_body, make_csim  # noqa: F401


def maintain(sim: ComputeSim, name: str, body: dict) -> tuple[int, dict]:
    return sim.http("POST", f"/trainctl-sim/v1/projects/{PROJECT}/zones/{ZONE}/instances/{name}:maintenance", body)


def status(sim: ComputeSim, name: str) -> str:
    return sim.http("GET", sim.compute(f"zones/{ZONE}/instances/{name}"))[1]["status"]


def test_a_gpu_vm_is_told_an_hour_ahead_then_stopped(csim):
    csim.network()
    assert "error" not in csim.http("POST", csim.compute(f"zones/{ZONE}/instances"),
                                    instance_body("gpu-0", gpu=("nvidia-tesla-t4", 1)))[1]
    code, answer = maintain(csim, "gpu-0", {})
    assert code == 200 and answer["event"] == "TERMINATE_ON_HOST_MAINTENANCE"
    assert csim.backend.called("announce_maintenance") == [(f"{PROJECT}/{ZONE}/gpu-0", "TERMINATE_ON_HOST_MAINTENANCE")]
    csim.advance(3500)
    assert status(csim, "gpu-0") == "RUNNING"  # GPU VMs get an hour's notice
    assert maintain(csim, "gpu-0", {})[0] == 400  # already announced
    csim.advance(3700)  # from now, as every advance is
    assert status(csim, "gpu-0") == "TERMINATED"
    assert csim.backend.called("stop") == [f"{PROJECT}/{ZONE}/gpu-0"]


def test_a_migrating_vm_is_told_then_goes_on(csim):
    csim.network()
    csim.http("POST", csim.compute(f"zones/{ZONE}/instances"), instance_body("cpu-0"))
    code, answer = maintain(csim, "cpu-0", {"notice_seconds": 5})
    assert code == 200 and answer["event"] == "MIGRATE_ON_HOST_MAINTENANCE"
    csim.advance(6)
    assert status(csim, "cpu-0") == "RUNNING" and csim.backend.called("stop") == []
    assert [event for _, event in csim.backend.called("announce_maintenance")] == [
        "MIGRATE_ON_HOST_MAINTENANCE", "NONE"]
    assert maintain(csim, "nope", {})[0] == 404
