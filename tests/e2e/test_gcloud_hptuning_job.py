"""A gcloud user's hyperparameter tuning job, run as they type it: Google's published
hptuning_config.yaml (census/tf-keras, unchanged), the trainer given with --module-name and
--package-path (built from its setup.py, whose install_requires bring the real cloudml-hypertune
from PyPI), its arguments after `--`. Each trial reports `epoch_acc` through the unchanged
library; the sweep reads its file on the trial's chief, two trials at a time on a node each.
It is also the suite's one run whose nodes install the trainer from a wheel trainctl staged (no
source on them): a Vertex job's packageUris are staged the same way
(tests/unit/jobs/test_vertex_packages.py, test_job_specs_plan_as_their_native_experiments.py)."""

from __future__ import annotations

import csv

import pytest

from conftest import leftovers, run_id_of, trainctl
from tests.unit.jobs.test_gcloud_job_flags import SAMPLES, TRAINER

pytestmark = pytest.mark.e2e


def test_a_published_hptuning_config_sweeps_with_the_real_cloudml_hypertune(tmp_path, trainctl_home):
    runs = tmp_path / "runs"
    result = trainctl("run", str(SAMPLES / "census" / "tf-keras" / "hptuning_config.yaml"), "--stack", "local",
                      "--module-name", "trainer.task", "--package-path", str(TRAINER),
                      "--job-dir", "gs://my-bucket/census", "--runs-dir", str(runs), "--", "--num-epochs", "3",
                      timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "Traceback" not in output  # the sweep's watcher read every report without crashing
    assert "note: 2 trials at once, each on a node of its own" in output
    sweep_id = run_id_of(result.stdout)
    with open(runs / sweep_id / "trials.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["state"] for r in rows] == ["COMPLETE"] * 4  # maxTrials 4
    assert all(0.5 < float(r["epoch_acc"]) <= 1.0 for r in rows)
    assert {r["batch-size"] for r in rows} != {""} and all(0.01 <= float(r["learning-rate"]) <= 0.1 for r in rows)
    # the trial's own log: its arguments as AI Platform passes them, three epochs reported
    log = "\n".join(p.read_text() for p in (runs / sweep_id / "trial-0" / "logs").glob("*.log"))
    assert "epoch 3: accuracy" in log
    assert leftovers(sweep_id) == []
