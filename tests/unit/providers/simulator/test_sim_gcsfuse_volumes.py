"""The simulated kubelet's stand-in for the Cloud Storage FUSE CSI driver, before any pod runs:
which volumes it mounts where, the objects it copies (the `only-dir` folder only), a pod without
the sidecar annotation refused as GKE refuses it, and mountPaths it made removed after the pods."""

from __future__ import annotations

import pytest

from conftest import free_port
from gcpsim.kubernetes.volumes import MountPoints, gcsfuse_mounts


@pytest.fixture
def storage_url():
    from gcp_storage_emulator.server import create_server
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    url = f"http://127.0.0.1:{port}"
    bucket = storage.Client(project="p", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": url}).create_bucket("user-datasets")
    for name in ("digits/a.npz", "digits/sub/b.npz", "labels/c.txt"):
        bucket.blob(name).upload_from_string(name)
    yield url
    server.stop()


def pod(annotated: bool = True) -> dict:
    csi = {"driver": "gcsfuse.csi.storage.gke.io", "readOnly": True,
           "volumeAttributes": {"bucketName": "user-datasets", "mountOptions": "implicit-dirs,only-dir=digits"}}
    return {"metadata": {"annotations": {"gke-gcsfuse/volumes": "true"} if annotated else {}},
            "spec": {"volumes": [{"name": "d", "csi": csi}, {"name": "scratch", "emptyDir": {}}]}}


CONTAINER = {"volumeMounts": [{"name": "d", "mountPath": "/data/digits"}, {"name": "scratch", "mountPath": "/s"}]}


def test_a_gcsfuse_volume_holds_its_only_dir_folder_at_its_mount_path(storage_url, tmp_path):
    (mount,) = gcsfuse_mounts(pod(), CONTAINER, tmp_path, storage_url)  # emptyDir is not the driver's
    assert mount.path == "/data/digits" and mount.read_only
    files = sorted(str(p.relative_to(mount.source)) for p in mount.source.rglob("*") if p.is_file())
    assert files == ["a.npz", "sub/b.npz"]
    assert (mount.source / "a.npz").read_text() == "digits/a.npz"
    assert mount.shell().endswith("mount -o remount,bind,ro /data/digits")


def test_without_the_sidecar_annotation_the_volume_cannot_be_mounted(storage_url, tmp_path):
    with pytest.raises(ValueError, match='needs the pod annotation gke-gcsfuse/volumes: "true"'):
        gcsfuse_mounts(pod(annotated=False), CONTAINER, tmp_path, storage_url)


def test_a_bucket_that_is_not_there_fails_the_mount_naming_it(storage_url, tmp_path):
    missing = pod()
    missing["spec"]["volumes"][0]["csi"]["volumeAttributes"]["bucketName"] = "no-such-bucket"
    with pytest.raises(ValueError, match="gs://no-such-bucket could not be mounted"):
        gcsfuse_mounts(missing, CONTAINER, tmp_path, storage_url)


def test_mount_paths_made_for_pods_go_when_the_last_pod_ends(tmp_path):
    (tmp_path / "kept").mkdir()
    path = str(tmp_path / "kept" / "data" / "digits")
    MountPoints.hold([path])
    MountPoints.hold([path])  # a second pod of the Job
    MountPoints.release([path])
    assert (tmp_path / "kept" / "data" / "digits").is_dir()
    MountPoints.release([path])
    assert not (tmp_path / "kept" / "data").exists() and (tmp_path / "kept").is_dir()
