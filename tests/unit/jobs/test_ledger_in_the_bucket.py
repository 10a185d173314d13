"""The ledger beside the run's checkpoints: written into the job dir of a real GCS emulator
through the same gcsfs client collect uses, and read back whole."""

from __future__ import annotations

from infra.spec.ledger import Interval, Ledger, NodeRate
from tests.unit.jobs.test_collect import bucket  # noqa: F401 - the fixture: a GCS emulator on loopback
from trainctl.jobs import ledger_record


def test_the_ledger_is_written_next_to_the_checkpoints(bucket):  # noqa: F811
    emulator, fs = bucket
    inventory = emulator.model_copy(update={"bucket_uri": "gs://b"})
    ledger = Ledger(run_id="run-1", started=0, ended=10,
                    nodes=(NodeRate(name="node0", capacity="on-demand", usd_per_hour=1, on_demand_usd_per_hour=1),),
                    intervals=(Interval(kind="productive_training", start=0, end=10, nodes=("node0",)),))
    assert ledger_record.upload(ledger, inventory) == "gs://b/run-1/ledger.json"
    assert Ledger.from_json(fs.cat("b/run-1/ledger.json").decode()) == ledger
