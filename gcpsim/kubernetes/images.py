"""What a simulated cluster's pods run in place of their container image.

A simulated pod is a process on this machine, not a container: nothing is pulled or unpacked.
An image is stood in for by a Python environment (its bin/ goes first on PATH) and, where the
image holds code, a folder that becomes the pod's working directory:

  - Google's framework images (facts/framework_images.py, CPU and GPU pools) by an environment
    with the framework and numpy, scikit-learn, gcsfs (environments.py), built from the host's
    uv cache on first use (the pod waits in ContainerCreating meanwhile);
  - an image a client makes of its code for a simulated cluster (`stand_in_code`) by that code,
    copied with the client's rsync filters, and the Python environment the client made for it:
    what the client's image build would have put in the image;
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
from gcpsim.kubernetes import environments

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
    try:
        env = environments.framework(home, framework, _dir(home) / "pull.log")
    except environments.EnvironmentFailed as exc:
        raise ImageUnavailable(str(exc)) from None
    return StandIn(env, None, f"a {framework} environment ({', '.join(environments.PACKAGES[framework])}) "
                              "built from the host's uv cache")


def stand_in_code(home: Path, name: str, code_dir: Path, env: Path | None,
                  rsync_filters: tuple[str, ...] = (), repository: str = SIMULATED_REGISTRY) -> str:
    """The image a client would build of its code, for a simulated cluster: the code copied
    (rsync with the client's filters) and the environment the client made for it; returns the
    image's name (named by content), which pods of that image then run."""
    folder = _dir(home) / name
    staging = folder / "staging"
    staging.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["rsync", "-a", "--delete", "--delete-excluded", *rsync_filters,
                           f"{code_dir}/", f"{staging}/"], capture_output=True, text=True)
    if done.returncode != 0:
        raise ImageUnavailable(f"copying {code_dir}: {done.stderr.strip()}")
    digest = _digest(staging, env)
    code = folder / digest
    if not code.exists():
        staging.rename(code)
    code.touch()  # the newest made or used: kept by _prune
    image = f"{repository}/{name}:{digest}"
    register(home, image, env=env, workdir=code,
             describe=f"the code of {code_dir} and the environment {env or '(none)'}")
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
