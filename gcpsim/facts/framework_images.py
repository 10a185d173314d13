"""Google's published framework container images a simulated GKE pod may name, by image reference:
(framework, accelerator kind). Deep Learning Containers live in
us-docker.pkg.dev/deeplearning-platform-release/gcr.io/<name> with names <framework>-<cpu|cuXYZ>.<M-m>.py<NNN>
(https://cloud.google.com/deep-learning-containers/docs/choosing-container; the page's list itself was
not in the stored material, so these are the images trainctl's stacks name, unverified as current);
the PyTorch/XLA TPU image: us-central1-docker.pkg.dev/tpu-pytorch-releases/docker/xla:r<ver>_3.10_tpuvm
(https://github.com/pytorch/xla README, "Docker" section; likewise not re-read here)."""

from __future__ import annotations

_DLC = "us-docker.pkg.dev/deeplearning-platform-release/gcr.io"

FRAMEWORK_IMAGES: dict[str, tuple[str, str]] = {
    f"{_DLC}/pytorch-cpu.2-4.py310": ("torch", "cpu"),
    f"{_DLC}/pytorch-cu124.2-4.py310": ("torch", "gpu"),
    "us-central1-docker.pkg.dev/tpu-pytorch-releases/docker/xla:r2.7.0_3.10_tpuvm": ("torch", "tpu"),
    f"{_DLC}/tf2-cpu.2-12.py310": ("tensorflow", "cpu"),
    f"{_DLC}/tf2-gpu.2-12.py310": ("tensorflow", "gpu"),
}
