"""What a simulated cluster's pods run in place of their container image.

A simulated pod is a process on this machine, not a container: nothing is pulled or unpacked.
An image is stood in for by a Python environment (its bin/ goes first on PATH) and, where the
image holds code, a folder that becomes the pod's working directory:

  - Google's framework images (the catalog's GKE_IMAGES for CPU and GPU pools) by an
    environment with the framework and what the reference trainers use beside it (numpy,
    scikit-learn, gcsfs: trainers/requirements*.txt), built offline from the controller's uv
    cache on first use (the pod waits in ContainerCreating meanwhile);
  - an image made for a simulated stack from an experiment's code and requirements
    (`stand_in_code`) by that code, copied as bootstrap would sync it, and an environment
    with its requirements: what `trainctl build` would have put in the image;
  - any other image cannot be pulled: the pod waits in ErrImagePull, as a kubelet that cannot
    reach the registry, saying so.

The table of stood-in images is a JSON file in the simulator home, changed under a lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from gcpsim.facts.framework_images import FRAMEWORK_IMAGES
from infra.spec.stack_config import REPO_ROOT

FRAMEWORK_REQUIREMENTS = {"torch": "trainers/requirements.txt", "tensorflow": "trainers/requirements-tf.txt"}
SIMULATED_REGISTRY = "simulated.registry.invalid/trainctl"  # names images made here (never resolvable)
KEEP_PER_NAME = 3  # images of one experiment's code kept in the simulator home


class ImageUnavailable(Exception):
    """The image cannot be run here; the message says why, as the pod's waiting message."""


@dataclass(frozen=True)
class StandIn:
    env: Path | None  # a Python environment: its bin/ first on PATH
    workdir: Path | None  # the image's working directory (its code); None: a folder per pod
    describe: str


def _dir(home: Path) -> Path:
    return home / "kubernetes" / "images"


@contextlib.contextmanager
def _table(home: Path) -> Iterator[dict[str, Any]]:
    folder = _dir(home)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(folder / "table.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = folder / "table.json"
        table = json.loads(path.read_text()) if path.exists() else {}
        before = json.dumps(table, sort_keys=True)
        yield table
        if json.dumps(table, sort_keys=True) != before:
            path.write_text(json.dumps(table, indent=1, sort_keys=True))


def register(home: Path, image: str, *, env: Path | None, workdir: Path | None, describe: str) -> None:
    with _table(home) as table:
        table[image] = {"env": str(env) if env else None, "workdir": str(workdir) if workdir else None,
                        "describe": describe}


def _framework_of(image: str) -> str | None:
    """The framework of one of Google's framework images (facts/framework_images.py) (CPU and GPU pools;
    the TPU images' runtimes, libtpu and torch_xla, have no stand-in here)."""
    framework, kind = FRAMEWORK_IMAGES.get(image, (None, None))
    return framework if kind in ("cpu", "gpu") else None


def resolve(home: Path, image: str) -> StandIn:
    """What runs the pod in place of `image` (may build an environment: slow the first time)."""
    with _table(home) as table:
        known = table.get(image)
    if known:
        return StandIn(Path(known["env"]) if known["env"] else None,
                       Path(known["workdir"]) if known["workdir"] else None, known["describe"])
    framework = _framework_of(image)
    if framework is None:
        raise ImageUnavailable(
            f'Failed to pull image "{image}": a simulated cluster pulls no images; it stands in for '
            "Google's framework images (" + ", ".join(sorted(f"{f}/{k}" for f, k in FRAMEWORK_IMAGES.values()
                                                             if k != "tpu"))
            + ") and for the images trainctl makes from an experiment's code")
    requirements = FRAMEWORK_REQUIREMENTS[framework]
    env = seed_environment(REPO_ROOT, requirements, home / "kubernetes" / "images" / "pull.log")
    return StandIn(env, None, f"a {framework} environment ({requirements}: the framework, numpy, "
                              f"scikit-learn, gcsfs) built from the controller's uv cache")


def seed_environment(code_dir: Path, requirements: str, log: Path) -> Path:
    """An environment with the requirements, made (once) as bootstrap seeds offline nodes':
    uv installs them from the controller's cache, hardlinking what it holds."""
    from bootstrap.plan import BootstrapSpec, seed_argv
    from bootstrap.uv_cache import controller_uv, fill_uv_cache, install_failure
    from infra.providers.offline_uv import offline_uv_env
    from infra.providers.stack_home import cache_dir

    spec = BootstrapSpec(code_dir=code_dir, requirements=requirements)
    node_env = offline_uv_env(cache_dir())
    seed = seed_argv(node_env, spec, controller_uv())[2]
    log.parent.mkdir(parents=True, exist_ok=True)
    seed.parent.mkdir(parents=True, exist_ok=True)
    # two pods (or trainctl and a pod) may want the same environment at once: one builds it
    with open(f"{seed}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        code, output = fill_uv_cache(node_env, spec, log)
    if code != 0:
        raise ImageUnavailable(f"building the environment for {requirements} failed: "
                               + install_failure(requirements, output, log))
    return seed


def stand_in_code(home: Path, name: str, code_dir: Path, requirements: str | None,
                  excludes: tuple[str, ...] = (), repository: str = SIMULATED_REGISTRY) -> str:
    """The image an experiment's code would be built into, for a simulated cluster: its code
    copied (as bootstrap syncs it) and an environment with its requirements; returns the
    image's name (named by content), which pods of that image then run."""
    from bootstrap.plan import BootstrapSpec, filter_args

    spec = BootstrapSpec(code_dir=code_dir, requirements=requirements, excludes=excludes)
    folder = _dir(home) / name
    staging = folder / "staging"
    staging.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["rsync", "-a", "--delete", "--delete-excluded", *filter_args(spec),
                           f"{code_dir}/", f"{staging}/"], capture_output=True, text=True)
    if done.returncode != 0:
        raise ImageUnavailable(f"copying {code_dir}: {done.stderr.strip()}")
    env = seed_environment(code_dir, requirements, folder / "build.log") if requirements else None
    digest = _digest(staging, env)
    code = folder / digest
    if not code.exists():
        staging.rename(code)
    code.touch()  # the newest made or used: kept by _prune
    image = f"{repository}/{name}:{digest}"
    register(home, image, env=env, workdir=code,
             describe=f"the code of {code_dir} and an environment with {requirements or 'no requirements'}")
    _prune(home, folder)
    return image


def _prune(home: Path, folder: Path, keep: int = KEEP_PER_NAME) -> None:
    """Older images of the same name go (as a registry's cleanup policy would): the newest
    `keep`, which a run still going may use, stay."""
    made = sorted((p for p in folder.iterdir() if p.is_dir() and p.name != "staging"),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    with _table(home) as table:
        for old in made[keep:]:
            for image in [i for i, entry in table.items() if entry["workdir"] == str(old)]:
                del table[image]
            shutil.rmtree(old, ignore_errors=True)


def _digest(tree: Path, env: Path | None) -> str:
    """Named by content: the files' paths and bytes, and the environment used."""
    h = hashlib.sha256(str(env).encode())
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]
