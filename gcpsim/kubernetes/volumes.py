"""Cloud Storage FUSE CSI volumes, as the simulated kubelet gives them to a pod.

On GKE the driver (gcsfuse.csi.storage.gke.io) mounts the bucket, or its `only-dir` folder, at
each of the container's volumeMounts through the gcsfuse sidecar that the pod annotation
`gke-gcsfuse/volumes: "true"` has injected; without the annotation the volume cannot be mounted
(https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-ephemeral).
Here its effect stands in for it: the objects are copied from the simulator's storage into the
pod's folder before the pod starts, and that folder is bind-mounted at the mountPath inside the
pod's own mount namespace (read-only where the volume or the mount says so). A mountPath that
does not exist on this machine is created for the pod's lifetime and removed after it (pods
share this machine's files: see processes.py).
Not modelled: reads through FUSE (a file written to the bucket after the pod started is not
seen), the sidecar's container and its resource annotations, volumes of other drivers.
"""

from __future__ import annotations

import os
import shlex
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gcpsim.kubernetes.objects import Obj

DRIVER = "gcsfuse.csi.storage.gke.io"
SIDECAR_ANNOTATION = "gke-gcsfuse/volumes"


@dataclass(frozen=True)
class Mount:
    source: Path
    path: str
    read_only: bool

    def shell(self) -> str:
        target = shlex.quote(self.path)
        line = f"mount --bind {shlex.quote(str(self.source))} {target}"
        return line + (f" && mount -o remount,bind,ro {target}" if self.read_only else "")


def _options(attributes: dict[str, Any]) -> dict[str, str]:
    """`mountOptions`: gcsfuse flags, comma-separated, `name` or `name=value`."""
    pairs = (o.strip().partition("=") for o in str(attributes.get("mountOptions", "")).split(","))
    return {name: value for name, _, value in pairs if name}


def _copy_objects(storage_url: str, bucket: str, only_dir: str, dest: Path) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project="simulated-kubelet", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": storage_url})
    prefix = f"{only_dir.strip('/')}/" if only_dir.strip("/") else ""
    dest.mkdir(parents=True, exist_ok=True)
    for blob in client.list_blobs(bucket, prefix=prefix):
        relative = blob.name[len(prefix):]
        if not relative or relative.endswith("/") or ".." in relative.split("/"):
            continue  # folder placeholders; names gcsfuse would not show as files
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        blob.download_to_filename(str(target))


def gcsfuse_mounts(pod: Obj, container: Obj, folder: Path, storage_url: str) -> list[Mount]:
    """The container's gcsfuse volumes, their objects copied under `folder`; ValueError (the pod
    cannot start) where the sidecar annotation is missing or the bucket cannot be read."""
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    annotated = (pod["metadata"].get("annotations") or {}).get(SIDECAR_ANNOTATION) == "true"
    mounts = []
    for mount in container.get("volumeMounts") or []:
        csi = (volumes.get(mount["name"]) or {}).get("csi") or {}
        if csi.get("driver") != DRIVER:
            continue
        if not annotated:
            raise ValueError(f"volume {mount['name']}: the {DRIVER} driver needs the pod annotation "
                             f'{SIDECAR_ANNOTATION}: "true" (its sidecar mounts the bucket)')
        attributes = csi.get("volumeAttributes") or {}
        source = folder / "volumes" / mount["name"]
        try:
            _copy_objects(storage_url, attributes["bucketName"], _options(attributes).get("only-dir", ""), source)
        except Exception as exc:  # no bucket, no such name: the driver's mount fails
            raise ValueError(f"volume {mount['name']}: gs://{attributes.get('bucketName')} could not be "
                             f"mounted: {exc}") from None
        mounts.append(Mount(source, mount["mountPath"], bool(csi.get("readOnly") or mount.get("readOnly"))))
    return mounts


class MountPoints:
    """Folders made on this machine for mountPaths that were not there, each removed when the
    last pod mounting there has ended (pods of every simulated cluster share this machine)."""

    _lock = threading.Lock()
    _users: dict[str, int] = {}
    _made: dict[str, list[str]] = {}

    @classmethod
    def hold(cls, paths: list[str]) -> None:
        with cls._lock:
            for path in paths:
                if cls._users.get(path, 0) == 0:
                    missing = [str(p) for p in [Path(path), *Path(path).parents] if not p.exists()]
                    os.makedirs(path, exist_ok=True)
                    cls._made[path] = missing  # deepest first
                cls._users[path] = cls._users.get(path, 0) + 1

    @classmethod
    def release(cls, paths: list[str]) -> None:
        with cls._lock:
            for path in paths:
                cls._users[path] -= 1
                if cls._users[path] > 0:
                    continue
                del cls._users[path]
                for made in cls._made.pop(path, []):
                    if any(other == made or other.startswith(made + "/") for other in cls._users):
                        break
                    try:
                        os.rmdir(made)
                    except OSError:  # something else was put there meanwhile: it stays
                        break
