"""An experiment's `data:` on the real local stack: the dataset (scikit-learn's digits as .npz
shards in a bucket of the GCS emulator STORAGE_EMULATOR_HOST names, as a user's data sits in
GCS) is staged onto 4 nodes, each node reading it itself, and the DDP trainer reads it there;
staging again onto the same nodes copies nothing, and a changed object (a new generation) is
copied again, alone. Counted from what the nodes report they copied, never from time."""

from __future__ import annotations

import io
import json
import re
import socket

import numpy as np
import pytest

from conftest import REPO, digits_shards, leftovers, run_id_of, trainctl

pytestmark = pytest.mark.e2e

SHARD = 100  # samples per object: 1,797 digits make 18 objects


@pytest.fixture
def user_bucket(monkeypatch, tmp_path, trainer_python):
    """The user's bucket `user-datasets`, holding digits/ as .npz shards, in a GCS emulator on
    loopback; STORAGE_EMULATOR_HOST names it for trainctl."""
    from gcp_storage_emulator.server import create_server
    from google.cloud import storage

    shards = tmp_path / "shards"
    shards.mkdir()
    digits_shards(trainer_python, shards, SHARD)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket="user-datasets")
    server.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    bucket = storage.Client().bucket("user-datasets")
    for shard in sorted(shards.iterdir()):
        bucket.blob(f"digits/{shard.name}").upload_from_filename(str(shard))
    yield bucket
    server.stop()


def npz(x: np.ndarray, y: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, x=x, y=y)
    return buf.getvalue()


def staged(output: str) -> dict[str, tuple[int, int]]:
    """`trainctl stage`'s result lines: node → (objects copied, objects already there)."""
    return {m[1]: (int(m[2]), int(m[3]))
            for m in re.finditer(r"^(node\d)\tcopied (\d+)\t\d+\tkept (\d+)$", output, re.M)}


def test_data_is_staged_to_every_node_once_and_a_new_generation_again(tmp_path, trainctl_home, user_bucket):
    exp = tmp_path / "digits-data.yaml"
    exp.write_text(f"""
name: digits-data
stack: local
overrides: {{nodes: 4}}
code: {REPO}
requirements: trainers/requirements.txt
run:
  command: python -m trainers.digits_ddp --epochs 4 --job-dir {{job_dir}} --data-dir digits
restart: {{max_restarts: 0, job_retries: 0}}
ttl_hours: 1
data:
  - {{source: gs://user-datasets/digits/, path: digits}}
network_check: {{below: warn, size_mb: 8}}
""")
    runs = tmp_path / "runs"
    result = trainctl("run", str(exp), "--runs-dir", str(runs), "--keep")
    run_id = run_id_of(result.stdout)
    try:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert len(re.findall(r"^\[trainctl\] data on node\d: 18 objects copied", result.stdout, re.M)) == 4
        for node in ("node0", "node1", "node2", "node3"):  # every rank read the staged shards
            log = (runs / run_id / "logs" / "launch" / f"{node}.log").read_text()
            assert "data: 1797 samples from digits" in log, log[-2000:]
        phases = list(json.loads((runs / run_id / "timings.json").read_text()))
        assert phases[:5] == ["up", "bootstrap", "data staging", "network check", "train"], phases
        network = json.loads((runs / run_id / "network.json").read_text())  # the pre-flight's figure
        assert network["world"] == 4 and network["gbps"] > 0 and network["transport"] == "TCP (gloo)"
        assert json.loads((runs / run_id / "metrics.json").read_text())["world_size"] == 4

        again = trainctl("stage", str(exp), "--stack", run_id, "--runs-dir", str(runs))
        assert again.returncode == 0, again.stderr[-3000:]
        assert staged(again.stdout) == {f"node{i}": (0, 18) for i in range(4)}, again.stdout

        x = np.zeros((3, 64))
        user_bucket.blob("digits/shard-005.npz").upload_from_string(npz(x, np.zeros(3, dtype=int)))
        changed = trainctl("stage", str(exp), "--stack", run_id, "--runs-dir", str(runs))
        assert changed.returncode == 0, changed.stderr[-3000:]
        assert staged(changed.stdout) == {f"node{i}": (1, 17) for i in range(4)}, changed.stdout
    finally:
        down = trainctl("down", "--stack", run_id)
        assert down.returncode == 0, down.stderr
    assert leftovers(run_id) == []
