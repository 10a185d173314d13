"""An experiment's `data:` inputs as read and checked before anything exists: bad sources and
paths are refused naming the input (exit 2), inputs that cannot be had on the stack are refused
before the stack is created, and each node's staging command is inspectable data."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from bootstrap.data_inputs import DataInput, stage_command
from infra.errors import ConfigError
from infra.providers.inventory import Inventory, Node
from trainctl.jobs.experiment import prepare_run
from trainctl.jobs.experiment_file import load_experiment


def experiment(tmp_path: Path, data: str, extra: str = "", stack: str = "local") -> Path:
    f = tmp_path / "exp.yaml"
    f.write_text(f"name: withdata\nstack: {stack}\nrun:\n  command: python train.py\n{extra}data:\n{data}")
    return f


@pytest.mark.parametrize("data, said", [
    ("  - {source: /mnt/digits, path: digits}\n", "must be a Cloud Storage URI, gs://<bucket>/<prefix>"),
    ("  - {source: gs://My_Bucket/digits/, path: digits}\n", "bucket name 'My_Bucket'"),
    ("  - {source: gs://datasets/digits/, path: /data/digits}\n", "must be a relative folder name"),
    ("  - {source: gs://datasets/digits/, path: ../digits}\n", "must be a relative folder name"),
    ("  - {source: gs://datasets/a/, path: d}\n  - {source: gs://datasets/b/, path: d/b}\n",
     "data paths 'd' and 'd/b' overlap"),
    ("  - {source: gs://datasets/a/, path: d, mode: fuse}\n", "'stage' or 'mount'"),
])
def test_bad_data_inputs_are_refused_naming_them(tmp_path, data, said):
    with pytest.raises(ConfigError) as refused:
        load_experiment(experiment(tmp_path, data))
    assert said in str(refused.value) and "data" in str(refused.value)


def test_the_local_stack_without_a_gcs_emulator_is_refused_before_anything_exists(tmp_path, monkeypatch):
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    exp = load_experiment(experiment(tmp_path, "  - {source: gs://datasets/digits/, path: digits}\n"))
    with pytest.raises(ConfigError, match="STORAGE_EMULATOR_HOST=http://127.0.0.1:<port>"):
        prepare_run(exp, "withdata-1", tmp_path / "runs", print)
    assert not (tmp_path / "runs").exists()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://10.0.0.5:9023")
    with pytest.raises(ConfigError, match="this machine only"):
        prepare_run(exp, "withdata-1", tmp_path / "runs", print)


def test_a_gcp_run_lets_its_nodes_read_each_data_bucket(tmp_path):
    data = ("  - {source: gs://datasets/digits/, path: digits}\n  - {source: gs://datasets/labels/, path: labels}\n"
            "  - {source: gs://more-data.example.com/x, path: x, mode: mount}\n")
    run = prepare_run(load_experiment(experiment(tmp_path, data, stack="gpu-t4x2")), "withdata-1", tmp_path / "runs", print)
    assert run.spec.data_buckets == ("datasets", "more-data.example.com")  # each once: one grant per bucket


def test_a_gke_run_mounts_its_data_in_every_pod(tmp_path):
    exp = load_experiment(experiment(tmp_path, "  - {source: gs://datasets/digits/, path: digits}\n", stack="gke-l4"))
    run = prepare_run(exp, "withdata-1", tmp_path / "runs", print)
    assert run.spec.data_buckets == ("datasets",) and run.lspec.data == exp.data  # the Job's pods mount them


def test_a_stack_files_data_bucket_must_be_a_bucket_name():
    from infra.spec.cluster import ClusterSpec

    with pytest.raises(ValueError, match="data_buckets: 'gs://datasets/digits' .*without gs://"):
        ClusterSpec(name="s", data_buckets=("gs://datasets/digits",))
    assert ClusterSpec(name="s", data_buckets=("bb2", "bb1", "bb2")).data_buckets == ("bb1", "bb2")


def test_data_in_a_container_is_refused_before_anything_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9023")
    exp = load_experiment(experiment(tmp_path, "  - {source: gs://datasets/digits/, path: digits}\n",
                                     extra="container: {}\n"))
    with pytest.raises(ConfigError, match="not mounted into the image"):
        prepare_run(exp, "withdata-1", tmp_path / "runs", print)


def test_each_node_stages_into_its_own_data_folder_in_an_environment_of_its_own():
    node = Node(name="node1", rank=1, internal_ip="10.0.0.3", ssh_host="10.0.0.3", host_keys=("ssh-ed25519 AAAA",),
                workdir="/srv/w1")
    inventory = Inventory(stack="s", provider="local", nodes=(node,), bucket_uri="gs://b", ssh_private_key="/k",
                          known_hosts="/kh", node_env={"STORAGE_EMULATOR_HOST": "http://10.0.0.2:9023"})
    inputs = (DataInput(source="gs://datasets/digits/", path="digits"),
              DataInput(source="gs://datasets/labels", path="labels", mode="mount"))
    command = stage_command(inventory, node, inputs)
    assert command.startswith("export STORAGE_EMULATOR_HOST=http://10.0.0.2:9023 ; ")
    assert "venv -q --python python3 /srv/w1/.trainctl/stager" in command
    assert "pip install -q --python /srv/w1/.trainctl/stager/bin/python 'google-cloud-storage" in command
    words = shlex.split(command.rsplit(" && ", 1)[1])
    assert words[:2] == ["/srv/w1/.trainctl/stager/bin/python", "-c"]
    assert json.loads(words[3]) == [
        {"source": "gs://datasets/digits/", "dest": "/srv/w1/data/digits", "mount": False},
        {"source": "gs://datasets/labels", "dest": "/srv/w1/data/labels", "mount": True}]
