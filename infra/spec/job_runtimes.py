"""What a job's runtime installs: AI Platform's runtime versions and Vertex AI's prebuilt training
images, as the framework each one ships (data; not accelerator data, so beside the catalog).

trainctl's nodes run their own Python with a uv environment instead of Google's images, so a
runtime becomes a pin of its framework (`tensorflow==2.11.*`) installed with the job's packages,
and a runtime whose framework has no build for the nodes' Python is refused before anything
exists, naming the nearest one that has.

Sources (checked for this table):
  AI Platform runtime X.Y ships TensorFlow X.Y: AI Platform Training's release notes ("runtime
    version 1.13 ... supports TensorFlow 1.13"; "versions 1.11 and 1.12 ... support TensorFlow
    1.11 and 1.12 respectively"), https://cloud.google.com/ai-platform/training/docs/release-notes
  runtime versions and --python-version: gcloud's own flag help (googlecloudsdk
    command_lib/ml_engine/flags.py, AddPythonVersionFlag): "3.7 is compatible with runtime
    versions 1.15 and later; 3.5 with 1.4 through 1.14; 2.7 with 1.15 and earlier"; the same in
    the ml v1 discovery document (TrainingInput.pythonVersion). No runtime 2.0: TFX's AI Platform
    pusher maps TensorFlow 2.0 to runtime 1.15 (tfx/extensions/google_cloud_ai_platform).
    Google's runtime version list (https://cloud.google.com/ai-platform/training/docs/runtime-version-list)
    names the other packages of each runtime; it could not be read for this table, so only the
    framework is pinned.
  Vertex AI prebuilt training images, named <framework>-<cpu|gpu|...>.<major>-<minor>[.pyXY]:
    https://cloud.google.com/vertex-ai/docs/supported-frameworks-list (e.g.
    us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-14.py310:latest, pytorch-gpu.2-4.py310)
  TensorFlow's Python versions per release: "Tested build configurations", Linux CPU,
    https://www.tensorflow.org/install/source#tested_build_configurations
    (github.com/tensorflow/docs site/en/install/source.md)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# TensorFlow release (major.minor) -> the Python 3 versions it was built for, oldest and newest.
TENSORFLOW_PYTHONS: dict[str, tuple[str, str]] = {
    "1.0": ("3.3", "3.6"), "1.1": ("3.3", "3.6"), "1.2": ("3.3", "3.6"), "1.3": ("3.3", "3.6"),
    "1.4": ("3.3", "3.6"), "1.5": ("3.3", "3.6"), "1.6": ("3.3", "3.6"), "1.7": ("3.3", "3.6"),
    "1.8": ("3.3", "3.6"), "1.9": ("3.3", "3.6"), "1.10": ("3.3", "3.6"), "1.11": ("3.3", "3.6"),
    "1.12": ("3.3", "3.6"), "1.13": ("3.3", "3.7"), "1.14": ("3.3", "3.7"), "1.15": ("3.3", "3.7"),
    "2.0": ("3.3", "3.7"), "2.1": ("3.5", "3.7"), "2.2": ("3.5", "3.8"), "2.3": ("3.5", "3.8"),
    "2.4": ("3.6", "3.8"), "2.5": ("3.6", "3.9"), "2.6": ("3.6", "3.9"), "2.7": ("3.7", "3.9"),
    "2.8": ("3.7", "3.10"), "2.9": ("3.7", "3.10"), "2.10": ("3.7", "3.10"), "2.11": ("3.7", "3.10"),
    "2.12": ("3.8", "3.11"), "2.13": ("3.8", "3.11"), "2.14": ("3.9", "3.11"), "2.15": ("3.9", "3.11"),
    "2.16": ("3.9", "3.12"), "2.17": ("3.9", "3.12"), "2.18": ("3.9", "3.12"), "2.19": ("3.9", "3.12"),
    "2.20": ("3.9", "3.13"), "2.21": ("3.10", "3.13"),
}

# AI Platform Training's runtime versions, oldest first, and the Python versions each took.
AI_PLATFORM_RUNTIMES: dict[str, tuple[str, ...]] = {
    **{f"1.{m}": ("2.7", "3.5") for m in range(4, 15)},
    "1.15": ("2.7", "3.7"),
    **{f"2.{m}": ("3.7",) for m in range(1, 12)},
}

# Vertex AI's prebuilt training images: the name's framework -> its PyPI distribution.
PREBUILT_FRAMEWORKS = {"tf": "tensorflow", "tf2": "tensorflow", "pytorch": "torch",
                       "scikit-learn": "scikit-learn", "sklearn": "scikit-learn", "xgboost": "xgboost"}
PREBUILT_IMAGE = re.compile(
    r"^(?:[a-z0-9-]+-docker\.pkg\.dev/vertex-ai|gcr\.io/cloud-aiplatform)/training/"
    r"(?P<framework>tf2?|pytorch|scikit-learn|sklearn|xgboost)-(?P<device>[a-z0-9]+)"
    r"\.(?P<major>\d+)-(?P<minor>\d+)(?:\.py(?P<py>\d{2,3}))?(?::[\w.-]+)?$")

# Distributions that install the same framework module: a job that requires one of them has
# the framework (tensorflow-cpu is TensorFlow without GPU support).
FRAMEWORK_DISTRIBUTIONS = {"tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu"),
                           "torch": ("torch",), "scikit-learn": ("scikit-learn",), "xgboost": ("xgboost",)}


@dataclass(frozen=True)
class FrameworkPin:
    """The framework a runtime ships, to be installed at its major.minor."""

    package: str  # PyPI distribution
    version: str  # major.minor
    source: str  # what named it, for messages: "runtimeVersion 2.11", "executorImageUri ..."

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}.*"

    @property
    def pythons(self) -> tuple[str, str] | None:
        """The Python versions the framework release was built for, where the table knows."""
        return TENSORFLOW_PYTHONS.get(self.version) if self.package == "tensorflow" else None


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def runs_on(pin: FrameworkPin, python: str) -> bool | None:
    """Whether the pinned framework has a build for `python` (X.Y); None where unknown."""
    pythons = pin.pythons
    if pythons is None:
        return None
    return version_key(pythons[0]) <= version_key(python) <= version_key(pythons[1])


def ai_platform_runtime(runtime: str, python: str | None) -> FrameworkPin:
    """The framework of an AI Platform runtime version; a runtime or Python version AI Platform
    never offered is refused by name, as AI Platform refuses it."""
    if runtime not in AI_PLATFORM_RUNTIMES:
        raise ValueError(f"runtimeVersion {runtime!r} is not an AI Platform runtime version; valid: "
                         f"{', '.join(AI_PLATFORM_RUNTIMES)}")
    if python and python not in AI_PLATFORM_RUNTIMES[runtime]:
        takes = [r for r, pys in AI_PLATFORM_RUNTIMES.items() if python in pys]
        raise ValueError(f"pythonVersion {python!r} does not go with runtimeVersion {runtime} (it takes "
                         f"{' or '.join(AI_PLATFORM_RUNTIMES[runtime])}); Python {python} goes with "
                         f"runtime versions {takes[0]} to {takes[-1]}" if takes else
                         f"pythonVersion {python!r} is not one AI Platform offered (3.7, 3.5, 2.7)")
    return FrameworkPin("tensorflow", runtime, f"runtimeVersion {runtime}")


def prebuilt_image(uri: str, field: str) -> FrameworkPin | None:
    """The framework of one of Vertex AI's prebuilt training images; None for other images."""
    match = PREBUILT_IMAGE.match(uri)
    if not match:
        return None
    return FrameworkPin(PREBUILT_FRAMEWORKS[match["framework"]], f"{int(match['major'])}.{int(match['minor'])}",
                        f"{field} {uri}")


def nearest_runtime(pin: FrameworkPin, python: str) -> str | None:
    """The AI Platform runtime version closest to `pin`'s whose TensorFlow runs on `python`."""
    return _nearest(pin.version, [r for r in AI_PLATFORM_RUNTIMES if runs_on(FrameworkPin("tensorflow", r, ""), python)])


def nearest_tensorflow(version: str, python: str) -> str | None:
    """The TensorFlow release closest to `version` that was built for `python`."""
    return _nearest(version, [v for v in TENSORFLOW_PYTHONS if runs_on(FrameworkPin("tensorflow", v, ""), python)])


def _nearest(version: str, candidates: list[str]) -> str | None:
    """The candidate fewest TensorFlow releases away from `version` (1.15 is next to 2.0)."""
    order = sorted({*TENSORFLOW_PYTHONS, version}, key=version_key)
    here = order.index(version)
    return min(candidates, key=lambda v: (abs(order.index(v) - here), version_key(v)), default=None)
