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
from typing import Any, Callable
from urllib.parse import urlparse

from infra.errors import ConfigError
from infra.providers.stack_home import cache_dir

ARCHIVES = (".tar.gz", ".zip", ".whl")  # what pip installs from a URI, as Vertex's images do
REQUIREMENTS = "requirements.txt"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def bucket_client(reaches_google: bool) -> Any:
    """gcsfs for the packages' bucket: Google Cloud Storage with the controller's credentials, or
    the emulator STORAGE_EMULATOR_HOST names (gcsfs's own convention), which the local stack
    requires: its nodes and tests reach nothing off this machine."""
    emulator = check_reach(reaches_google)
    os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # see trainctl.jobs.collect
    import gcsfs

    return gcsfs.GCSFileSystem(token="anon") if emulator else gcsfs.GCSFileSystem()


def check_reach(reaches_google: bool) -> str:
    """The emulator STORAGE_EMULATOR_HOST names ("" for none), refused where the stack cannot
    read the packages from there; nothing is reached (a plan checks this too)."""
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
    return emulator


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


def stage(uris: list[str], *, reaches_google: bool, requirements: Path | None = None,
          archives: tuple[tuple[Path, str], ...] = (), pins: tuple[str, ...] = (),
          environment: Callable[[list[Path]], list[str]] = lambda wheels: []) -> Path:
    """The packages (`uris` fetched from gs://, `archives` on this machine, each with what the
    user called it) as a folder of wheels
    plus `requirements.txt` (the wheels, the lines of `requirements`, then what `environment`
    returns for the wheels: the runtime's framework pins, whose candidates `pins` names), kept by
    content in the cache: the same packages give the same folder, which a rerun finds after
    downloading them (to compare) without building again."""
    if uris:
        check_uris(uris)
    names = [u.rsplit("/", 1)[1] for u in uris] + [a.name for a, _ in archives]
    if len(set(names)) != len(names):
        raise ConfigError(f"packages: two share a file name ({', '.join(names)})")
    with tempfile.TemporaryDirectory(prefix="packages-", dir=_packages_root()) as tmp:
        fetched = _fetch(uris, Path(tmp), reaches_google)
        for archive, _ in archives:
            fetched.append(Path(shutil.copy2(archive, Path(tmp) / archive.name)))
        extra = requirements.read_text() if requirements else ""
        digest = hashlib.sha256("\n".join([extra, *pins]).encode())
        for local in fetched:
            digest.update(local.name.encode() + hashlib.sha256(local.read_bytes()).digest())
        folder = _packages_root() / digest.hexdigest()[:16]
        if (folder / REQUIREMENTS).is_file():
            environment(sorted(folder.glob("*/*.whl")))  # its notes, and its checks, again
            return folder
        build = Path(tmp) / "out"
        shown = uris + [label for _, label in archives]
        wheels = _wheels(shown, fetched, Path(tmp), build)
        pinned = environment([build / w for w in wheels])
        lines = [f"# {source}" for source in shown] + [f"./{w}" for w in wheels]
        if extra:
            lines += [f"# from {requirements}", extra.rstrip("\n")]
        if pinned:
            lines += ["# the job's runtime: its framework, as Google's image had it", *pinned]
        (build / REQUIREMENTS).write_text("\n".join(lines) + "\n")
        try:
            build.rename(folder)
        except OSError:  # staged meanwhile by a concurrent run: the same content
            pass
    return folder


def _fetch(uris: list[str], tmp: Path, reaches_google: bool) -> list[Path]:
    if not uris:
        return []
    fs = bucket_client(reaches_google)
    fetched = [tmp / uri.rsplit("/", 1)[1] for uri in uris]
    for uri, local in zip(uris, fetched):
        try:
            fs.get(uri, str(local))
        except FileNotFoundError:
            raise ConfigError(f"packageUris: {uri} does not exist") from None
        except Exception as exc:  # 403, 5xx after gcsfs' retries, no credentials
            raise ConfigError(f"packageUris: {uri} cannot be read: {type(exc).__name__}: {exc}") from None
    return fetched


def _wheels(sources: list[str], fetched: list[Path], tmp: Path, build: Path) -> list[str]:
    """Every package as a wheel under `build`, each in a folder named by its content (uv keeps
    an installed wheel whose path is unchanged, so a rebuilt package of the same version must
    come from a new path); their paths relative to `build`."""
    built = tmp / "built"
    built.mkdir()
    build.mkdir()
    for source, local in zip(sources, fetched):
        if local.name.endswith(".whl"):
            shutil.copy2(local, built / local.name)
            continue
        # (uv also writes a .gitignore of `*` there, which would hide the folder from sync)
        done = subprocess.run([_uv(), "build", "-q", "--wheel", "--out-dir", str(built), str(local)],
                              capture_output=True, text=True)
        if done.returncode:
            raise ConfigError(f"packages: {source} does not build into a wheel:\n{done.stderr.strip()[-2000:]}")
    wheels = []
    for wheel in sorted(built.glob("*.whl")):
        sub = build / hashlib.sha256(wheel.read_bytes()).hexdigest()[:12]
        sub.mkdir()
        wheel.rename(sub / wheel.name)
        wheels.append(f"{sub.name}/{wheel.name}")
    return wheels


def _packages_root() -> Path:
    root = cache_dir() / "packages"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _uv() -> str:
    from bootstrap.uv_cache import controller_uv

    return controller_uv()
