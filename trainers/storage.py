"""Job-dir I/O for trainers: gs:// through gcsfs (the GCS emulator when STORAGE_EMULATOR_HOST is
set, as on the local stack), plain paths through the local filesystem. No trainctl import."""

from __future__ import annotations

import os

import fsspec


def filesystem(uri: str) -> fsspec.AbstractFileSystem:
    if uri.startswith("gs://"):
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        if emulator:
            return fsspec.filesystem("gs", token="anon", endpoint_url=emulator)
        return fsspec.filesystem("gs")
    return fsspec.filesystem("file")


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def write_bytes(uri: str, data: bytes) -> None:
    """Whole-object write: a GCS object appears only once its upload completed; a local file is
    written beside its target and renamed, so a reader never sees half of it."""
    fs = filesystem(uri)
    if uri.startswith("gs://"):
        with fs.open(uri, "wb") as fh:
            fh.write(data)
        return
    os.makedirs(os.path.dirname(uri) or ".", exist_ok=True)
    tmp = f"{uri}.tmp-{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, uri)


def read_bytes(uri: str) -> bytes:
    with filesystem(uri).open(uri, "rb") as fh:
        return fh.read()


def exists(uri: str) -> bool:
    return filesystem(uri).exists(uri)


def listdir(uri: str) -> list[str]:
    fs = filesystem(uri)
    try:
        return sorted(p.rsplit("/", 1)[-1] for p in fs.ls(uri, detail=False))
    except FileNotFoundError:
        return []
