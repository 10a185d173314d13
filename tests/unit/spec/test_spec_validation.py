"""ClusterSpec, stack files and experiment files: bad input fails with the field, the value and
the valid choices, before anything is created."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import load_stack
from trainctl.jobs.experiment_file import load_experiment

GCP = {"provider": "gcp", "project": "proj", "zone": "us-central1-a",
       "ssh": {"source_ranges": ["203.0.113.7/32"]}}


def spec(**fields):
    return ClusterSpec.model_validate({"name": "c1", **fields})


def error_of(**fields) -> str:
    with pytest.raises(ValueError) as info:
        spec(**fields)
    return str(info.value)


def test_local_stack_defaults_to_two_cpu_nodes():
    s = load_stack("local")
    assert (s.provider, s.node_count, s.procs_per_node, str(s.accelerator)) == ("local", 2, 1, "cpu")


def test_bundled_gpu_machine_implies_its_gpus():
    s = spec(**GCP, machine_type="a2-highgpu-8g")
    assert (s.gpu.type, s.gpu.count, s.procs_per_node) == ("nvidia-tesla-a100", 8, 8)


@pytest.mark.parametrize("machine_type, gpu, expected", [
    ("n1-standard-8", {"type": "a100", "count": 2}, ["cannot be attached to n1-standard-8", "a2-highgpu-2g"]),
    ("g2-standard-8", {"type": "l4", "count": 4}, ["comes with 1 x nvidia-l4"]),
    ("n1-standard-8", {"type": "t4", "count": 3}, ["gpu.count 3", "valid: 1, 2, 4"]),
    ("n1-standard-32", {"type": "nvidia-tesla-v100", "count": 1}, ["32 vCPUs"]),
], ids=["bundled-only GPU names its machines", "bundled machine with another count",
        "attachable count from the catalog", "too many vCPUs for the GPU count"])
def test_a_gpu_the_machine_cannot_take_is_refused_naming_what_it_can(machine_type, gpu, expected):
    msg = error_of(**GCP, machine_type=machine_type, gpu=gpu)
    assert all(part in msg for part in expected), msg


def test_gpu_not_offered_in_zone():
    msg = error_of(**{**GCP, "zone": "asia-south1-a"}, machine_type="n1-standard-8",
                   gpu={"type": "t4", "count": 1})
    assert "not offered in zone 'asia-south1-a'" in msg


def test_tpu_zone_and_runtime_are_checked():
    msg = error_of(**{**GCP, "zone": "us-central2-b"}, kind="tpu", tpu={"type": "v5litepod-16"})
    assert "v5litepod-16 is not offered in zone 'us-central2-b'" in msg
    msg = error_of(**GCP, kind="tpu", tpu={"type": "v5litepod-16", "runtime_version": "tpu-vm-v4-base"})
    assert "runtime_version 'tpu-vm-v4-base' is not offered for v5litepod-16" in msg


def test_tensorflow_runtime_must_match_the_slices_host_count():
    """A -pod TF runtime on one host (or a single-host one on a slice) fails only at training."""
    msg = error_of(**GCP, kind="tpu", tpu={"type": "v5litepod-16", "runtime_version": "tpu-vm-tf-2.18.0-pjrt"})
    assert "a multi-host slice (4 hosts), which needs a -pod TensorFlow runtime" in msg
    assert "tpu-vm-tf-2.18.0-pod-pjrt" in msg
    msg = error_of(**GCP, kind="tpu", tpu={"type": "v5litepod-8", "runtime_version": "tpu-vm-tf-2.18.0-pod-pjrt"})
    assert "a single host, which needs a non-pod TensorFlow runtime" in msg
    for tpu_type, runtime in (("v5litepod-16", "tpu-vm-tf-2.18.0-pod-pjrt"), ("v5litepod-8", "tpu-vm-tf-2.18.0-pjrt")):
        assert spec(**GCP, kind="tpu", tpu={"type": tpu_type, "runtime_version": runtime}).tpu.runtime_version == runtime


def test_multi_host_tpu_sets_node_count_to_its_hosts():
    s = spec(**GCP, kind="tpu", tpu={"type": "v5litepod-16"})
    assert s.node_count == 4 and s.procs_per_node == 1
    assert "has 4 host(s)" in error_of(**GCP, kind="tpu", nodes=2, tpu={"type": "v5litepod-16"})


@pytest.mark.parametrize("name", ["UPPER", "1starts-with-digit", "ends-", "x" * 42, "has_underscore", ""])
def test_names_gce_would_reject(name):
    with pytest.raises(ValueError, match="name"):
        ClusterSpec.model_validate({"name": name})


def write_experiment(tmp_path: Path, body: str) -> Path:
    (tmp_path / "requirements.txt").write_text("")
    f = tmp_path / "exp.yaml"
    f.write_text(body)
    return f


def test_example_experiment_is_valid():
    exp = load_experiment(Path(__file__).resolve().parents[3] / "examples" / "digits-ddp.yaml")
    assert exp.run.command[:3] == ("python", "-m", "trainers.digits_ddp")
    assert (exp.code_dir / exp.requirements).is_file()


def test_run_command_string_is_split_not_shell_evaluated(tmp_path):
    exp = load_experiment(write_experiment(
        tmp_path, "name: e\nrun: {command: \"python t.py --tag '$(rm -rf /)' ; echo\"}\n"))
    assert exp.run.command == ("python", "t.py", "--tag", "$(rm -rf /)", ";", "echo")


def _gcp(**over):
    from infra.spec.cluster import ClusterSpec

    fields = dict(name="t", provider="gcp", project="my-project", zone="us-central1-a",
                  machine_type="n1-standard-8", ssh={"source_ranges": ["203.0.113.7/32"]})
    return ClusterSpec.model_validate({**fields, **over})


def test_queued_tpu_is_refused_with_the_reason_and_the_alternative():
    with pytest.raises(ValueError, match=r"tpu.queued.*no metadata.*SSH key.*create the TPU directly"):
        _gcp(kind="tpu", machine_type=None, zone="us-west4-a",
             tpu={"type": "v5litepod-8", "queued": True})


@pytest.mark.parametrize("name", ["My_Bucket", "ab", "-abc", "abc-", "goog-data", "my-google-data",
                                  "192.168.5.4", "a" * 64, "a..b", ("a" * 64) + ".b"])
def test_bad_bucket_names_are_refused(name):
    with pytest.raises(ValueError, match="bucket.name"):
        _gcp(bucket={"name": name})


@pytest.mark.parametrize("name", ["my-bucket", "my_bucket.example.com", "abc", "a1-b2_c3"])
def test_good_bucket_names_pass(name):
    assert _gcp(bucket={"name": name}).bucket.name == name


def test_a_spot_stack_is_deleted_when_reclaimed_unless_it_asks_to_be_stopped():
    assert ClusterSpec(name="s", spot=True).instance_termination_action == "DELETE"
    assert ClusterSpec(name="s", spot=True, instance_termination_action="STOP").instance_termination_action == "STOP"
    assert ClusterSpec(name="s").instance_termination_action is None
    with pytest.raises(ValueError, match="instance_termination_action applies to spot VMs only"):
        ClusterSpec(name="s", instance_termination_action="STOP")
