"""Host maintenance announced in the metadata, as GCE announces it, on a 3-node run of the local
stack: a live migration (MIGRATE_ON_HOST_MAINTENANCE) on one node is recorded and stops nothing;
a TERMINATE_ON_HOST_MAINTENANCE on another drains that node before the host takes it (the run
stopped everywhere, the trainer checkpointing on the stop), the node is started again once the
maintenance stopped it, and the run resumes from the checkpoint and ends with the step count and
accuracy of an undisturbed run; nothing is left behind. The preemption twin is
tests/reliability/test_spot_recovery.py."""

from __future__ import annotations

import pytest

from conftest import Streamed, experiment, leftovers
from infra.providers.local import realizer
from tests.reliability.test_spot_recovery import EPOCHS, SPOT, finished_as_undisturbed, undisturbed_metrics

pytestmark = pytest.mark.e2e

MIGRATE, TERMINATE = "MIGRATE_ON_HOST_MAINTENANCE", "TERMINATE_ON_HOST_MAINTENANCE"


def test_terminate_maintenance_drains_the_node_and_the_run_ends_as_an_undisturbed_one(trainctl_home, tmp_path):
    undisturbed = undisturbed_metrics(experiment(tmp_path, EPOCHS, nodes=3, name="calm", extra=SPOT))

    # a pause between epochs leaves room for both notices inside the run
    maintained = experiment(tmp_path, f"{EPOCHS} --epoch-sleep 2", nodes=3, name="maint", extra=SPOT)
    run, run_id = Streamed.run(maintained, tmp_path / "runs")
    run.wait_for(r"epoch 2/6")
    assert realizer.host_maintenance(run_id, "node1", MIGRATE, notice=1) == "MIGRATED"
    run.wait_for(rf"node1: {MIGRATE} announced: no drain")
    run.wait_for(r"node1: the host maintenance is over")  # seen by trainctl before the next notice
    assert realizer.host_maintenance(run_id, "node2", TERMINATE, notice=3, grace=2) == "TERMINATED"
    run.wait_for(r"recovery 1: recreating node2")
    output, result = finished_as_undisturbed(run, tmp_path / "runs" / run_id, undisturbed)
    assert result["ok"] and result["attempts"] == 2  # the migration stopped nothing; the drain one attempt
    assert [r["nodes"] for r in result["recoveries"]] == [["node2"]]
    assert result["recoveries"][0]["steps_redone"] == 0, output  # drained: checkpointed where it stopped
    events = [(e["node"], e["event"], e["action"].split(":")[0]) for e in result["maintenance_events"]]
    assert events == [("node1", MIGRATE, "no drain"), ("node1", "NONE", "the host maintenance is over"),
                      ("node2", TERMINATE, "drained")]
    assert output.count("stopping run") == 1 and "host maintenance ahead on node2" in output
    assert "waiting for the host maintenance to stop it" in output
    assert "host maintenance announced 3 time(s):" in output  # the run's summary says so too
    assert leftovers(run_id) == []
