"""TensorFlow on TPU VMs: refused before anything exists where the stack's runtime has no
TensorFlow, and able to look its slice up where it has (TPUClusterResolver reads the node)."""

from __future__ import annotations

import pytest

from infra.errors import ConfigError
from infra.providers.gcp.program.mocks import evaluate
from infra.providers.gcp.program.cluster import TPU_VIEWER_ROLE, service_account_id
from infra.spec.stack_config import load_stack
from trainctl.jobs.experiment import refuse_framework_mismatch


def test_tensorflow_on_a_runtime_without_it_is_refused_naming_the_runtime_that_has_it():
    spec = load_stack("tpu-v5e-16")  # v2-alpha-tpuv5-lite: JAX/PyTorch, no TensorFlow
    with pytest.raises(ConfigError) as refused:
        refuse_framework_mismatch(spec, "tensorflow")
    assert "'v2-alpha-tpuv5-lite' has none" in str(refused.value)
    assert "tpu-vm-tf-2.18.0-pod-pjrt" in str(refused.value)  # the multi-host (pod) runtime
    single = load_stack("tpu-v5e-8")
    with pytest.raises(ConfigError, match="'tpu-vm-tf-2.18.0-pjrt'"):
        refuse_framework_mismatch(single, "tensorflow")


def test_tensorflow_on_a_tf_runtime_and_torch_anywhere_pass():
    spec = load_stack("tpu-v5e-16", overrides={"tpu": {"type": "v5litepod-16",
                                                       "runtime_version": "tpu-vm-tf-2.18.0-pod-pjrt"}})
    refuse_framework_mismatch(spec, "tensorflow")
    refuse_framework_mismatch(load_stack("tpu-v5e-16"), "torch")


def test_tpu_nodes_may_read_their_slice_and_nothing_more():
    spec = load_stack("tpu-v5e-16")
    ev = evaluate(spec)
    grants = [m.inputs for m in ev.of_type("projects/iAMMember:IAMMember")]
    viewer = [g for g in grants if g["role"] == TPU_VIEWER_ROLE]
    assert len(viewer) == 1 and viewer[0]["member"].startswith(f"serviceAccount:{service_account_id(spec)}@")
    assert not any(g["role"] == TPU_VIEWER_ROLE for g in
                   (m.inputs for m in evaluate(load_stack("gpu-t4x2")).of_type("projects/iAMMember:IAMMember")))


def test_torch_on_a_stack_with_parameter_servers_is_refused_before_anything_exists():
    with pytest.raises(ConfigError, match="PyTorch has no parameter servers"):
        refuse_framework_mismatch(load_stack("tf-ps-pools"), "torch")
    refuse_framework_mismatch(load_stack("tf-ps-pools"), "tensorflow")
