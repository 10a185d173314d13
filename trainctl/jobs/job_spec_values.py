"""The values an AI Platform `trainingInput` and a Vertex AI CustomJob both carry, read the same
way for either: machine types, accelerators, durations, the trainer's module, a container as the
pool's program, and the framework the job's images or runtime name. Each is refused by name,
with the nearest alternative, where trainctl cannot honour it. Pure: an image's ENTRYPOINT is
read by the function the caller passes in."""

from __future__ import annotations

import re
from typing import Any, Callable

from pydantic import ValidationError

from infra.errors import ConfigError
from infra.spec import catalog
from infra.spec.job_runtimes import prebuilt_image
from trainctl.jobs.experiment_spec import ContainerSection

# AI Platform's legacy machine names and the Compute Engine machine types they stand for.
LEGACY_MACHINES = {"standard": "n1-standard-4", "large_model": "n1-highmem-8",
                   "complex_model_s": "n1-highcpu-8", "complex_model_m": "n1-highcpu-16",
                   "complex_model_l": "n1-highcpu-32"}
RETIRED_ACCELERATORS = {"NVIDIA_TESLA_K80": "NVIDIA_TESLA_T4", "NVIDIA_TESLA_P4": "NVIDIA_TESLA_T4",
                        "NVIDIA_TESLA_P100": "NVIDIA_TESLA_T4"}

# An image's (ENTRYPOINT, CMD), given the image and where in the spec it is named.
ImageReader = Callable[[str, str], tuple[list[str], list[str]]]


def refuse(where: str, why: str) -> ConfigError:
    return ConfigError(f"{where}: {why}")


def framework(images: list[str], notes: list[str], ai_platform: bool) -> str:
    """Which launcher the job needs, from its prebuilt training image (Vertex) or AI Platform's
    runtime (TensorFlow's)."""
    if any("pytorch" in image for image in images):
        return "torch"
    if any(re.search(r"/tf[-.\d]|tensorflow", image) for image in images) or ai_platform:
        return "tensorflow"
    notes.append("no executorImageUri names a framework: running it as PyTorch (torchrun); "
                 "give --framework tensorflow for a TensorFlow job")
    return "torch"


def duration_hours(value: str, where: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(value))
    if not match:
        raise refuse(where, f"{value!r} is not a duration like '7200s'")
    return round(float(match.group(1)) / 3600, 4)


def accelerator(kind: str, count: int, where: str) -> dict[str, Any] | None:
    if kind in ("", "ACCELERATOR_TYPE_UNSPECIFIED"):
        return None
    if kind in RETIRED_ACCELERATORS:
        raise refuse(where, f"{kind} is retired on Google Cloud; the nearest offered: "
                            f"{RETIRED_ACCELERATORS[kind]}")
    if kind.startswith("TPU_"):
        raise refuse(where, f"{kind} in a worker pool: TPUs run as TPU VMs here; use a TPU stack "
                            "(e.g. --stack tpu-v5e-8) with a single pool")
    name = kind.lower().replace("_", "-")
    if name not in catalog.GPUS:
        raise refuse(where, f"accelerator {kind} is not in trainctl's catalog; offered: "
                            f"{', '.join(sorted(g.upper().replace('-', '_') for g in catalog.GPUS))}")
    return {"type": name, "count": count or 1}


def machine(name: str | None, where: str) -> str | None:
    if not name:
        return None
    if name in LEGACY_MACHINES:
        return LEGACY_MACHINES[name]
    if name.endswith("_gpu") or name.endswith(("_p100", "_v100")) or name == "cloud_tpu":
        raise refuse(where, f"legacy machine {name!r} bundles a retired accelerator or a Cloud TPU "
                            "node; name a Compute Engine machine type and an acceleratorConfig")
    return name


def module_command(module: str | None, args: list[str], where: str) -> list[str]:
    if not module:
        raise refuse(where, "pythonModule is required (the trainer's module, run as `python -m`): give "
                            "gcloud's --module-name (AI Platform) or python-module= in --worker-pool-spec")
    return ["python", "-m", module, *(str(a) for a in args)]


def container_command(where: str, container: dict[str, Any], env: dict[str, str], notes: list[str],
                      read_image: ImageReader) -> tuple[list[str], str | None]:
    """A containerSpec as the pool's command: in its image (the images trainctl can run, see
    ContainerSection), or, for one of Google's prebuilt training images, in the nodes' uv
    environment with the image's framework (trainctl.jobs.job_environment). The command and args as
    Vertex joins them; without a command, the image's ENTRYPOINT (and CMD unless args are given)."""
    image = container.get("imageUri", "")
    args = [str(a) for a in container.get("args", [])]
    for item in container.get("env", []):
        env[item["name"]] = str(item["value"])
    if prebuilt_image(image, ""):
        if not container.get("command"):
            raise refuse(f"{where}.containerSpec", f"{image} is one of Google's prebuilt training images, run here "
                                                   "as a uv environment with its framework: give command")
        notes.append(f"{where}.containerSpec.imageUri {image}: Google's prebuilt image; its command runs in the "
                     "nodes' uv environment with the image's framework")
        return [*container["command"], *args], None
    try:
        ContainerSection(image=image)
    except ValidationError as exc:
        raise refuse(f"{where}.containerSpec", exc.errors()[0]["msg"].removeprefix("Value error, ")) from None
    if container.get("command"):
        return [*container["command"], *args], image
    entrypoint, cmd = read_image(image, f"{where}.containerSpec")
    if not entrypoint and not cmd:
        raise refuse(f"{where}.containerSpec", f"{image} has neither ENTRYPOINT nor CMD: give command")
    notes.append(f"{where}.containerSpec: no command: {image}'s ENTRYPOINT {entrypoint} runs with "
                 f"{'args' if args else 'its CMD'} {args or cmd}, as Vertex runs it")
    return [*entrypoint, *(args or cmd)], image
