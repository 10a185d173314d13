"""Python environments that stand in for Google's framework images on a simulated GKE node: what
a pod of such an image imports, installed with uv into an environment of the simulator's home.

The packages are this machine's, not the image's: a Deep Learning Container holds its framework
and the usual scientific stack at the versions Google built it with, while the stand-in holds the
framework at the version this machine's package cache has (torch 2.13.0, whose CPU wheel the
host's find-links folder holds, and TensorFlow's CPU build) with numpy, scikit-learn and gcsfs.
uv hardlinks from the host's cache (TRAINCTL_CACHE, as the operator set it), so an environment
costs no second copy of torch.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGES: dict[str, tuple[str, ...]] = {
    "torch": ("torch==2.13.0", "numpy>=1.26", "scikit-learn>=1.4", "gcsfs>=2024.6"),
    "tensorflow": ("tensorflow-cpu==2.21.*", "numpy>=1.26", "scikit-learn>=1.4", "gcsfs>=2024.6"),
}
PYTHON = "/usr/bin/python3"  # the machines' interpreter (Debian's, shared from /usr)
HOST_WHEELS = "/opt/wheels"  # where this machine keeps wheels no index here has


class EnvironmentFailed(Exception):
    """uv could not make the environment; the message has its last words and the log's path."""


def _uv() -> list[str]:
    found = shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def uv_env() -> dict[str, str]:
    cache = Path(os.environ.get("TRAINCTL_CACHE", "/var/cache/trainctl")) / "uv"
    env = {**os.environ, "UV_CACHE_DIR": str(cache), "UV_LINK_MODE": "hardlink", "UV_PYTHON_DOWNLOADS": "never"}
    if os.path.isdir(HOST_WHEELS):
        env["UV_FIND_LINKS"] = HOST_WHEELS
    return env


def framework(home: Path, name: str, log: Path) -> Path:
    """The environment standing in for `name`'s images, made once (later calls find it)."""
    packages = PACKAGES[name]
    where = home / "kubernetes" / "environments" / hashlib.sha256("\n".join(packages).encode()).hexdigest()[:16]
    where.parent.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    # two pods may want the same environment at once: one builds it, the other then finds it
    with open(f"{where}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (where / ".complete").is_file():
            return where
        for argv in ([*_uv(), "venv", "-q", "--allow-existing", "--python", PYTHON, str(where)],
                     [*_uv(), "pip", "install", "-q", "--python", str(where / "bin" / "python"), *packages]):
            done = subprocess.run(argv, env=uv_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, errors="replace")
            with open(log, "a") as out:
                out.write(done.stdout)
            if done.returncode != 0:
                last = " ".join(done.stdout.strip().splitlines()[-3:])
                raise EnvironmentFailed(f"uv could not install {' '.join(packages)}: {last} (all of it: {log})")
        (where / ".complete").touch()
    return where
