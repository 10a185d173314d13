"""The node-side stager (bootstrap/stager/stage.py) run as a node runs it: a separate Python with
google-cloud-storage, the program text on its command line, STORAGE_EMULATOR_HOST naming the
bucket (here a GCS emulator on loopback). What it copies is read from its own report and from
the files it leaves: a rerun copies nothing, a new generation is copied again, an object gone
from the bucket goes from the folder, a staging cut short resumes with what it had not done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import free_port

from bootstrap.data_inputs import STAGER_PROGRAM
from bootstrap.data_staging import PROGRESS_MARK


@pytest.fixture
def bucket(monkeypatch):
    """A bucket `datasets` in a GCS emulator on loopback, as google-cloud-storage sees it."""
    from gcp_storage_emulator.server import create_server
    from google.cloud import storage

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket="datasets")
    server.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    yield storage.Client().bucket("datasets")
    server.stop()


def upload(bucket, objects: dict[str, bytes]) -> None:
    for name, content in objects.items():
        bucket.blob(name).upload_from_string(content)


def stage(dest: Path, source: str = "gs://datasets/digits/", mount: bool = False, path: str | None = None) -> dict:
    """One staging, as the node runs it; its summary for the one input."""
    entries = json.dumps([{"source": source, "dest": str(dest), "mount": mount}])
    env = {**os.environ, **({"PATH": path} if path else {})}
    done = subprocess.run([sys.executable, "-c", STAGER_PROGRAM.read_text(), entries], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line[len(PROGRESS_MARK):]) for line in done.stdout.splitlines()
             if line.startswith(PROGRESS_MARK)]
    return lines[-1]["summary"][0]


def shard(i: int) -> bytes:
    return f"shard {i} ".encode() * (100 + i)


def test_a_prefix_is_copied_whole_and_a_rerun_copies_nothing(bucket, tmp_path):
    upload(bucket, {f"digits/train/{i:03d}.bin": shard(i) for i in range(30)})
    upload(bucket, {"digits/README": b"readme", "other/skip.bin": b"not under the prefix",
                    "digits2/skip.bin": b"another folder"})
    first = stage(tmp_path / "digits", source="gs://datasets/digits")  # a folder, with or without its '/'

    assert (first["copied"], first["kept"]) == (31, 0)
    assert (tmp_path / "digits" / "train" / "007.bin").read_bytes() == shard(7)
    assert (tmp_path / "digits" / "README").read_bytes() == b"readme"
    assert not list(tmp_path.rglob("skip.bin")) and not list(tmp_path.rglob("*.part"))
    again = stage(tmp_path / "digits")
    assert (again["copied"], again["copied_bytes"], again["kept"]) == (0, 0, 31)


def test_a_new_generation_is_copied_again_and_only_it(bucket, tmp_path):
    upload(bucket, {f"digits/{i:03d}.bin": shard(i) for i in range(10)})
    stage(tmp_path / "d")
    upload(bucket, {"digits/004.bin": b"changed"})
    after = stage(tmp_path / "d")
    assert (after["copied"], after["kept"]) == (1, 9)
    assert (tmp_path / "d" / "004.bin").read_bytes() == b"changed"


def test_an_object_gone_from_the_bucket_goes_from_the_folder(bucket, tmp_path):
    upload(bucket, {f"digits/{i:03d}.bin": shard(i) for i in range(5)})
    stage(tmp_path / "d")
    bucket.blob("digits/002.bin").delete()
    (tmp_path / "d" / "mine.txt").write_text("a file the job wrote")
    after = stage(tmp_path / "d")
    assert (after["copied"], after["kept"], after["removed"]) == (0, 4, 1)
    assert not (tmp_path / "d" / "002.bin").exists()
    assert (tmp_path / "d" / "mine.txt").exists()  # never staged: never removed


def test_a_staging_cut_short_resumes_with_what_it_had_not_finished(bucket, tmp_path):
    upload(bucket, {f"digits/{i:03d}.bin": shard(i) for i in range(12)})
    stage(tmp_path / "d")
    journal = tmp_path / "d" / ".trainctl-staged"
    lines = journal.read_text().splitlines()
    # As a staging killed after 7 objects leaves it: 7 recorded, a half-written line, a partial
    # download under its temporary name, and the remaining files not there (or half there).
    journal.write_text("\n".join(lines[:7]) + '\n{"name": "digits/0')
    for name in ("008.bin", "009.bin", "010.bin", "011.bin"):
        (tmp_path / "d" / name).unlink()
    (tmp_path / "d" / "007.bin").write_bytes(b"half")
    (tmp_path / "d" / "008.bin.part").write_bytes(b"hal")
    resumed = stage(tmp_path / "d")
    assert (resumed["copied"], resumed["kept"]) == (5, 7)
    assert all((tmp_path / "d" / f"{i:03d}.bin").read_bytes() == shard(i) for i in range(12))
    assert stage(tmp_path / "d")["copied"] == 0  # and the journal it left is whole


def test_a_mount_input_is_mounted_read_only_where_the_node_has_gcsfuse_and_staged_where_not(bucket, tmp_path):
    upload(bucket, {"digits/a.bin": b"a", "digits/b.bin": b"b"})
    # gcsfuse cannot be installed here: a stand-in on PATH records the command line it gets
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcsfuse").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/gcsfuse-args\n')
    (bin_dir / "gcsfuse").chmod(0o755)
    mounted = stage(tmp_path / "m", mount=True, path=f"{bin_dir}:{os.environ['PATH']}")
    assert mounted["how"] == "mounted"
    assert (tmp_path / "gcsfuse-args").read_text().split() == [
        "--implicit-dirs", "--o", "ro", "--only-dir", "digits", "datasets", str(tmp_path / "m")]
    staged = stage(tmp_path / "s", mount=True)
    assert (staged["how"], staged["copied"]) == ("staged", 2)
