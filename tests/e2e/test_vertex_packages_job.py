"""A Vertex job whose trainer is a Python package in gs://, run as written: the reference DDP
trainer packaged as AI Platform's docs package trainers (an sdist whose dependencies are its
install_requires), put in a bucket, and `trainctl run examples/vertex/vertex-pytorch-ddp.yaml
--stack local` with no --code: the nodes get nothing but the package, installed."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import REPO, leftovers, run_id_of, trainctl
from tests.unit.jobs.test_vertex_packages import build_sdist, free_port

pytestmark = pytest.mark.e2e


def trainer_sdist(tmp_path):
    """The reference trainers as one package, their requirements as its dependencies."""
    src = tmp_path / "trainer"
    shutil.copytree(REPO / "trainers", src / "trainers", ignore=shutil.ignore_patterns("__pycache__", "*.txt"))
    requirements = [line for line in (REPO / "trainers" / "requirements.txt").read_text().splitlines()
                    if line and not line.startswith("#")]
    return build_sdist(src, "trainer", ["trainers"], requirements)


def test_a_vertex_job_runs_from_its_package_uris_without_the_source(tmp_path, trainctl_home, monkeypatch):
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # read at import; see trainctl.jobs.collect
    import gcsfs
    from gcp_storage_emulator.server import create_server

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket="my-bucket")
    server.start()
    try:
        fs = gcsfs.GCSFileSystem(token="anon", endpoint_url=f"http://127.0.0.1:{port}")
        fs.put(str(trainer_sdist(tmp_path)), "my-bucket/trainer-0.1.tar.gz")  # the spec's packageUris
        result = trainctl("run", str(REPO / "examples" / "vertex" / "vertex-pytorch-ddp.yaml"), "--stack", "local",
                          "--runs-dir", str(tmp_path / "runs"),
                          env={"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}"})
    finally:
        server.stop()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "fetched, built into wheels and installed on every node" in output
    run_id = run_id_of(result.stdout)
    metrics = json.loads((tmp_path / "runs" / run_id / "metrics.json").read_text())
    assert metrics["world_size"] == 3 and metrics["epochs"] == 4  # primary replica + 2 workers, args as written
    assert metrics["test_accuracy"] >= 0.9
    # what the nodes got as their code: the wheel and the requirements that name it, no source
    staged = Path(re.search(r"installed on every node \((\S+)\)", output).group(1))
    assert sorted(p.name for p in staged.rglob("*") if p.is_file()) == [
        "requirements.txt", "trainer-0.1-py3-none-any.whl"]
    assert leftovers(run_id) == []
