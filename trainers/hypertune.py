"""Report a metric for hyperparameter tuning (the role cloudml-hypertune plays on AI Platform).

The trainer calls `report("test_accuracy", 0.97, step=epoch)`; the values land in
<job dir>/hypertune/metrics.json, where trainctl reads them to rank trials and prune bad ones.
"""

from __future__ import annotations

import json
import os

from trainers import storage


def _path(job_dir: str) -> str:
    return storage.join(job_dir, "hypertune", "metrics.json")


def report(tag: str, value: float, step: int, job_dir: str | None = None) -> None:
    job_dir = job_dir or os.environ.get("AIP_MODEL_DIR", "./job/model").rstrip("/").rsplit("/", 1)[0]
    path = _path(job_dir)
    try:
        history = json.loads(storage.read_bytes(path))
    except Exception:
        history = []
    history.append({"tag": tag, "value": float(value), "step": int(step)})
    storage.write_bytes(path, json.dumps(history).encode())
