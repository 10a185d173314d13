"""A Vertex / AI Platform job's `packageUris` (its trainer as Python packages in gs://) as a code
folder that bootstrap syncs and installs like any other: the packages as wheels and a
requirements file that names them, installed into every node's environment with their
dependencies, as Vertex pip-installs them into its training image before `python -m`.

The controller fetches them (its credentials, once for all nodes) before anything is created, so
a missing or unreadable package stops the run with nothing to clean up. Source distributions are
built into wheels here, once: nodes then install without a build backend, offline ones too.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from infra.errors import ConfigError
from infra.stack_home import cache_dir

ARCHIVES = (".tar.gz", ".zip", ".whl")  # what pip installs from a URI, as Vertex's images do
REQUIREMENTS = "requirements.txt"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def bucket_client(reaches_google: bool) -> Any:
    """gcsfs for the packages' bucket: Google Cloud Storage with the controller's credentials, or
    the emulator STORAGE_EMULATOR_HOST names (gcsfs's own convention), which the local stack
    requires: its nodes and tests reach nothing off this machine."""
    emulator = os.environ.get("STORAGE_EMULATOR_HOST", "")
    if not reaches_google:
        if not emulator:
            raise ConfigError("packageUris: the local stack does not reach Google Cloud Storage. Give the "
                              "package's source folder with --code (and --requirements), or serve the "
                              "packages from a GCS emulator on this machine "
                              "(STORAGE_EMULATOR_HOST=http://127.0.0.1:<port>)")
        if urlparse(emulator).hostname not in LOOPBACK:
            raise ConfigError(f"STORAGE_EMULATOR_HOST {emulator}: the local stack reads packages from "
                              "this machine only (127.0.0.1)")
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # see trainctl.collect
    import gcsfs

    return gcsfs.GCSFileSystem(token="anon") if emulator else gcsfs.GCSFileSystem()


def check_uris(uris: list[str]) -> None:
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme != "gs" or not parsed.netloc or not parsed.path.strip("/"):
            raise ConfigError(f"packageUris: {uri!r} is not a gs://bucket/path URI")
        if not uri.endswith(ARCHIVES):
            raise ConfigError(f"packageUris: {uri} is not a Python package: give a source "
                              "distribution (.tar.gz, .zip) or a wheel (.whl)")
    names = [u.rsplit("/", 1)[1] for u in uris]
    if len(set(names)) != len(names):
        raise ConfigError(f"packageUris: two packages share a file name ({', '.join(names)})")


def stage(uris: list[str], *, reaches_google: bool, requirements: Path | None = None) -> Path:
    """The packages as a folder of wheels plus `requirements.txt` (the wheels, then the lines
    of `requirements`), kept by content in the cache: the same packages give the same folder,
    which a rerun finds after downloading them (to compare) without building again."""
    check_uris(uris)
    fs = bucket_client(reaches_google)
    with tempfile.TemporaryDirectory(prefix="packages-", dir=_packages_root()) as tmp:
        fetched = [Path(tmp) / uri.rsplit("/", 1)[1] for uri in uris]
        for uri, local in zip(uris, fetched):
            try:
                fs.get(uri, str(local))
            except FileNotFoundError:
                raise ConfigError(f"packageUris: {uri} does not exist") from None
            except Exception as exc:  # 403, 5xx after gcsfs' retries, no credentials
                raise ConfigError(f"packageUris: {uri} cannot be read: {type(exc).__name__}: {exc}") from None
        extra = requirements.read_text() if requirements else ""
        digest = hashlib.sha256(extra.encode())
        for local in fetched:
            digest.update(local.name.encode() + hashlib.sha256(local.read_bytes()).digest())
        folder = _packages_root() / digest.hexdigest()[:16]
        if (folder / REQUIREMENTS).is_file():
            return folder
        built, build = Path(tmp) / "built", Path(tmp) / "out"
        built.mkdir()
        build.mkdir()
        for uri, local in zip(uris, fetched):
            if local.name.endswith(".whl"):
                shutil.copy2(local, built / local.name)
                continue
            # (uv also writes a .gitignore of `*` there, which would hide the folder from sync)
            done = subprocess.run([_uv(), "build", "-q", "--wheel", "--out-dir", str(built), str(local)],
                                  capture_output=True, text=True)
            if done.returncode:
                raise ConfigError(f"packageUris: {uri} does not build into a wheel:\n{done.stderr.strip()[-2000:]}")
        # Each wheel under its content's digest: uv keeps an installed wheel whose path is
        # unchanged, so a rebuilt package of the same version must come from a new path.
        wheels = []
        for wheel in sorted(built.glob("*.whl")):
            sub = build / hashlib.sha256(wheel.read_bytes()).hexdigest()[:12]
            sub.mkdir()
            wheel.rename(sub / wheel.name)
            wheels.append(f"{sub.name}/{wheel.name}")
        lines = [f"# {uri}" for uri in uris] + [f"./{w}" for w in wheels]
        if extra:
            lines += [f"# from {requirements}", extra.rstrip("\n")]
        (build / REQUIREMENTS).write_text("\n".join(lines) + "\n")
        try:
            build.rename(folder)
        except OSError:  # staged meanwhile by a concurrent run: the same content
            pass
    return folder


def _packages_root() -> Path:
    root = cache_dir() / "packages"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _uv() -> str:
    from bootstrap.runner import controller_uv

    return controller_uv()
