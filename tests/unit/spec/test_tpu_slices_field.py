"""tpu.slices (TPU multislice): refused before anything exists where it cannot work, naming the fix."""

from __future__ import annotations

import pytest

from infra.errors import ConfigError
from infra.spec.stack_config import load_stack
from trainctl.jobs.experiment import refuse_framework_mismatch

MULTISLICE = "tpu-v5e-2x16"


def refusal(stack: str, **overrides) -> str:
    with pytest.raises(ConfigError) as refused:
        load_stack(stack, overrides=overrides)
    return str(refused.value)


def test_slices_without_a_queued_resource_are_refused():
    said = refusal("tpu-v5e-16", tpu={"type": "v5litepod-16", "slices": 2})
    assert "tpu.slices: 2 needs tpu.queued: true" in said and "only through a queued resource" in said


def test_slices_on_a_tensorflow_runtime_are_refused_naming_the_runtimes_that_can():
    said = refusal(MULTISLICE, tpu={"type": "v5litepod-16", "queued": True, "slices": 2,
                                    "runtime_version": "tpu-vm-tf-2.18.0-pod-pjrt"})
    assert "cannot use runtime_version 'tpu-vm-tf-2.18.0-pod-pjrt'" in said and "v2-alpha-tpuv5-lite" in said


def test_a_gke_multislice_stack_counts_every_slices_hosts_without_a_queued_resource():
    spec = load_stack("gke-tpu-v5e-2x16")
    assert spec.kind == "gke" and spec.tpu is not None and spec.tpu.slices == 2 and not spec.tpu.queued
    assert spec.node_count == 8
    said = refusal("gke-tpu-v5e-2x16", nodes=4)
    assert "nodes 4 does not match 2 slices of TPU type v5litepod-16, which have 8 host(s)" in said


def test_slices_of_a_single_host_type_on_gke_are_refused_naming_multi_host_types():
    said = refusal("gke-tpu-v5e-2x16", tpu={"type": "v5litepod-8", "slices": 2})
    assert "GKE runs Multislice on multi-host TPU slice node pools only" in said
    assert "v5litepod-8 is a single host" in said and "v5litepod-16" in said


def test_tensorflow_programs_on_a_gke_multislice_stack_are_refused():
    spec = load_stack("gke-tpu-v5e-2x16")
    with pytest.raises(ConfigError, match="TensorFlow cannot train on 2 TPU slices"):
        refuse_framework_mismatch(spec, "tensorflow")
    refuse_framework_mismatch(spec, "torch")


def test_a_multislice_stack_counts_every_slices_hosts():
    spec = load_stack(MULTISLICE)
    assert spec.tpu is not None and spec.tpu.slices == 2 and spec.node_count == 8
    assert "2 slices of TPU type v5litepod-16, which has 8 host(s)" in refusal(MULTISLICE, nodes=4)


def test_tensorflow_programs_on_a_multislice_stack_are_refused_and_torch_passes():
    spec = load_stack(MULTISLICE)
    with pytest.raises(ConfigError, match="TensorFlow cannot train on 2 TPU slices"):
        refuse_framework_mismatch(spec, "tensorflow")
    refuse_framework_mismatch(spec, "torch")

