"""Objects in simulated buckets: the home's GCS emulator behind the simulator's address, used
unchanged by google-cloud-storage (multipart and resumable uploads, downloads) and by gcsfs
(STORAGE_EMULATOR_HOST = the simulator)."""

from __future__ import annotations

import os

import pytest
from google.api_core.exceptions import NotFound
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from gcpsim.apis import storage_objects
from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401

BUCKET = f"{PROJECT}-stack-trainctl"


@pytest.fixture
def bucket(sim):
    gcs = storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                         client_options={"api_endpoint": sim.url})
    return gcs.create_bucket(BUCKET)


def test_multipart_and_resumable_uploads_come_back_byte_for_byte(bucket):
    bucket.blob("small.txt").upload_from_string(b"hello")
    large = os.urandom(3 * 1024 * 1024 + 17)
    blob = bucket.blob("ckpt/large.bin")
    blob.chunk_size = 1024 * 1024  # a resumable session of four chunks
    blob.upload_from_string(large)
    assert bucket.blob("small.txt").download_as_bytes() == b"hello"
    assert bucket.blob("ckpt/large.bin").download_as_bytes() == large
    assert sorted(b.name for b in bucket.list_blobs()) == ["ckpt/large.bin", "small.txt"]


def test_objects_of_a_bucket_the_world_does_not_have_are_404(sim, bucket):
    status, body = sim.http("GET", "/storage/v1/b/no-such-bucket-here/o")
    assert status == 404 and body["error"]["message"] == "The specified bucket does not exist."


def test_gcsfs_reads_and_writes_through_the_simulator(sim, bucket, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", sim.url)
    # read when gcsfs is imported; else it probes gRPC and stalls ~60 s a call (NOTES.md)
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    import gcsfs

    fs = gcsfs.GCSFileSystem(token="anon", project=PROJECT, skip_instance_cache=True)
    data = os.urandom(6 * 1024 * 1024)  # more than gcsfs's block: a resumable upload
    with fs.open(f"{BUCKET}/run-1/checkpoints/epoch-1.pt", "wb") as f:
        f.write(data)
    fs.pipe(f"{BUCKET}/run-1/metrics.json", b'{"accuracy": 0.97}')
    assert fs.cat(f"{BUCKET}/run-1/checkpoints/epoch-1.pt") == data
    assert sorted(fs.find(f"{BUCKET}/run-1")) == [f"{BUCKET}/run-1/checkpoints/epoch-1.pt",
                                                  f"{BUCKET}/run-1/metrics.json"]
    fs.rm(fs.find(f"{BUCKET}/run-1"))  # a batch of deletes
    assert fs.find(f"{BUCKET}/run-1") == []


def test_objects_outlive_the_simulator_process_and_its_emulator(make_sim, tmp_path):
    first = make_sim()
    gcs = storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                         client_options={"api_endpoint": first.url})
    gcs.create_bucket(BUCKET).blob("kept.txt").upload_from_string(b"still here")
    first.simulator.stop()  # stops the emulator too
    assert storage_objects._record(first.simulator.home) is None
    first.url = first.simulator.start()
    again = storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                           client_options={"api_endpoint": first.url})
    assert again.bucket(BUCKET).blob("kept.txt").download_as_bytes() == b"still here"
    with pytest.raises(NotFound):
        again.bucket(BUCKET).blob("never.txt").download_as_bytes()


def test_an_objects_links_point_at_the_address_the_reader_used(sim, bucket):
    """An object uploaded by the controller (loopback) is listed to a VM (the service address)
    with a mediaLink the VM can reach: google-cloud-storage downloads from it."""
    import json
    import urllib.request

    bucket.blob("data/shard-0.npz").upload_from_string(b"x")
    request = urllib.request.Request(f"{sim.url}/storage/v1/b/{BUCKET}/o?prefix=data/",
                                     headers={"Host": "10.215.0.1:8080"})
    with urllib.request.urlopen(request) as response:
        (item,) = json.loads(response.read())["items"]
    assert item["mediaLink"].startswith(f"http://10.215.0.1:8080/download/storage/v1/b/{BUCKET}/o/")
    assert bucket.get_blob("data/shard-0.npz").media_link.startswith(sim.url)  # the controller's own
