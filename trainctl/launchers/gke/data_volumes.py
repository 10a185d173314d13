"""An experiment's `data:` in a GKE Job's pods: each input is a read-only Cloud Storage FUSE CSI
ephemeral volume (driver gcsfuse.csi.storage.gke.io, the bucket in `bucketName`, the prefix as
gcsfuse's `only-dir` in `mountOptions`), mounted at `<DATA_ROOT>/<path>`; the pod annotation
`gke-gcsfuse/volumes: "true"` has GKE's webhook inject the gcsfuse sidecar. The pods read the
bucket as the Kubernetes service account Workload Identity binds to the nodes' Google account,
which the program grants roles/storage.objectViewer on each data bucket. Staged and mounted
inputs alike are mounts here: a pod has no disk of its own to stage into.
(https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-ephemeral)
"""

from __future__ import annotations

from typing import Any

from bootstrap.data_inputs import DATA_DIR_ENV, DataInput

CSI_DRIVER = "gcsfuse.csi.storage.gke.io"
SIDECAR_ANNOTATION = "gke-gcsfuse/volumes"
DATA_ROOT = "/data"  # TRAINCTL_DATA_DIR in the pods, as the node's data folder is on VM stacks


def volume_name(index: int) -> str:
    return f"trainctl-data-{index}"


def mount_options(item: DataInput) -> str:
    # implicit-dirs: folders that exist only as object-name prefixes are listed too
    only_dir = item.prefix.strip("/")
    return "implicit-dirs" + (f",only-dir={only_dir}" if only_dir else "")


def volumes(inputs: tuple[DataInput, ...]) -> list[dict[str, Any]]:
    return [{"name": volume_name(i), "csi": {
        "driver": CSI_DRIVER, "readOnly": True,
        "volumeAttributes": {"bucketName": item.bucket, "mountOptions": mount_options(item)}}}
        for i, item in enumerate(inputs)]


def volume_mounts(inputs: tuple[DataInput, ...]) -> list[dict[str, Any]]:
    return [{"name": volume_name(i), "mountPath": f"{DATA_ROOT}/{item.path}", "readOnly": True}
            for i, item in enumerate(inputs)]


def add_data(inputs: tuple[DataInput, ...], pod_template: dict[str, Any]) -> None:
    """The inputs into a Job's pod template (its metadata and spec), in place."""
    if not inputs:
        return
    metadata, pod = pod_template.setdefault("metadata", {}), pod_template["spec"]
    metadata.setdefault("annotations", {})[SIDECAR_ANNOTATION] = "true"
    pod.setdefault("volumes", []).extend(volumes(inputs))
    container = pod["containers"][0]
    container.setdefault("volumeMounts", []).extend(volume_mounts(inputs))
    container.setdefault("env", []).append({"name": DATA_DIR_ENV, "value": DATA_ROOT})
