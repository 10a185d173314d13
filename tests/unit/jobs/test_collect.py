"""Collect through gcsfs against a real GCS emulator on loopback: one listing of the job dir,
small files read in one batch, large ones streamed, folder markers and missing artifacts handled,
nothing in `dest` until everything is down."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from infra.providers.inventory import Inventory
from trainctl.jobs import collect as collect_mod


@pytest.fixture
def bucket(monkeypatch, tmp_path):
    from gcp_storage_emulator.server import create_server

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket="b")
    server.start()
    monkeypatch.setattr(collect_mod, "state_dir", lambda stack: tmp_path / "state")
    inventory = Inventory.model_construct(stack="s", storage_emulator_host=f"http://127.0.0.1:{port}")
    fs = collect_mod.bucket_fs(inventory)
    yield inventory, fs
    server.stop()


def test_files_and_folders_come_down_small_and_large_alike(bucket, tmp_path, monkeypatch):
    inventory, fs = bucket
    fs.pipe({"b/job/metrics.json": json.dumps({"test_accuracy": 0.97}).encode(),
             "b/job/model/weights.bin": b"w" * 4096, "b/job/model/config.json": b"{}",
             "b/job/model/": b"",  # a folder marker, as some tools write them
             "b/job/checkpoints/ckpt-1": b"c"})
    monkeypatch.setattr(collect_mod, "SMALL_FILE", 1024)  # weights.bin streams to disk
    dest = tmp_path / "run"
    missing = collect_mod.collect(inventory, "gs://b/job", ("metrics.json", "model/", "eval/"), dest,
                                  fs=fs, draw=False)
    assert missing == ["eval/"]
    assert json.loads((dest / "metrics.json").read_text()) == {"test_accuracy": 0.97}
    assert (dest / "model" / "weights.bin").read_bytes() == b"w" * 4096
    assert (dest / "model" / "config.json").read_bytes() == b"{}"
    assert sorted(p.name for p in dest.iterdir()) == ["metrics.json", "model"]  # no checkpoints
    assert not list((tmp_path / "state" / "collecting").iterdir())  # staging removed


def test_an_empty_job_dir_reports_every_artifact_missing(bucket, tmp_path):
    inventory, fs = bucket
    assert collect_mod.collect(inventory, "gs://b/none", ("metrics.json", "model/"), tmp_path / "run",
                               fs=fs, draw=False) == ["metrics.json", "model/"]


def test_a_collect_interrupted_while_copying_to_another_filesystem_leaves_no_half_artifact(bucket, tmp_path,
                                                                                          monkeypatch):
    inventory, fs = bucket
    fs.pipe({"b/job/model/a.bin": b"a", "b/job/model/b.bin": b"b", "b/job/metrics.json": b"{}"})
    real_copy = collect_mod.shutil.copy2

    def copy_one_then_interrupted(src, dst, **kwargs):  # where a move is a copy, cut short
        real_copy(src, dst)
        raise KeyboardInterrupt("signal SIGINT")

    def move_across_filesystems(src, dst):
        return collect_mod.shutil.copytree(src, dst, copy_function=copy_one_then_interrupted)

    monkeypatch.setattr(collect_mod.shutil, "move", move_across_filesystems)
    dest = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        collect_mod.collect(inventory, "gs://b/job", ("metrics.json", "model/"), dest, fs=fs, draw=False)
    assert list(dest.iterdir()) == []  # neither a partial model nor the hidden landing folder
    assert not list((tmp_path / "state" / "collecting").iterdir())
