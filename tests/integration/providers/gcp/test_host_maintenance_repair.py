"""Host maintenance on a GCP stack, the provider's half (the launcher's drain is proved with a
training in tests/reliability/test_maintenance_drain.py, the guest's notice on a simulated machine
in tests/e2e/test_sim_machines_see_maintenance_notices.py): the simulated project announces
maintenance on a spot GPU VM as GCE does, TERMINATE_ON_HOST_MAINTENANCE (GPU VMs cannot migrate),
stops it once the notice is over, the realizer reports it TERMINATED and `repair` starts that VM
again on its disk (instances.start), not a new one."""

from __future__ import annotations

from infra.providers.gcp import realizer
from tests.fakes.sim_stacks import Project, gcp, make_gcp, simulated_gcp  # noqa: F401 (fixtures)


def test_a_gpu_vm_stopped_by_host_maintenance_is_reported_stopped_and_started_again_on_its_disk(
        gcp: Project) -> None:  # noqa: F811
    spec = gcp.stack("gpu-l4-spot", scheduled_reaper=False)
    w0, w1 = (f"{spec.name}-node-{i}" for i in range(2))
    realizer.up(spec, gcp.progress)
    before = gcp.instance(w1)
    assert before is not None
    # notice_seconds 0: the maintenance is due at once, so the next call finds the VM stopped
    answer = gcp.admin("POST", f"zones/{spec.zone}/instances/{w1}:maintenance", {"notice_seconds": 0})
    assert answer["event"] == "TERMINATE_ON_HOST_MAINTENANCE"
    assert realizer.instance_status(spec.name, [w0, w1]) == {w0: "RUNNING", w1: "TERMINATED"}

    gcp.said.clear()
    realizer.repair(spec.name, [w1], gcp.progress)
    after = gcp.instance(w1)
    assert after is not None and after["id"] == before["id"], after  # started again, not recreated
    assert f"{w1}: starting it again on its disk" in gcp.said, gcp.said
    assert realizer.instance_status(spec.name, [w0, w1]) == {w0: "RUNNING", w1: "RUNNING"}
