"""An experiment's `data:` inputs: refused before anything exists where they cannot be had,
and staged onto every node after bootstrap as the run's "data staging" phase.

Nodes read the buckets themselves (bootstrap/data_inputs.py). Local nodes reach no Google
service, only the stack's own GCS emulator; their buckets come from the GCS emulator on this
machine that STORAGE_EMULATOR_HOST names (where a job's packageUris come from too): before the
nodes stage, the controller loads the named prefixes into the stack's emulator, skipping what it
already holds with the same checksum, so the objects' generations there stay as they were and
the nodes' cache holds across stagings onto the same stack.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable
from urllib.parse import urlparse

from bootstrap.data_inputs import DataInput
from infra.errors import ConfigError
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec

LOOPBACK = ("127.0.0.1", "localhost", "::1")
COPIERS = 8


def refuse_unobtainable(inputs: tuple[DataInput, ...], *, over_ssh: bool, reaches_google: bool,
                        image: bool) -> None:
    """Bad input, before anything is created (exit 2)."""
    if not inputs:
        return
    if not over_ssh:
        return  # GKE: every pod mounts them with the Cloud Storage FUSE CSI driver
    if image:
        raise ConfigError("data: with container, the staged folders are not mounted into the image; "
                          "leave container out (the node's uv environment reads them) or read gs:// "
                          "from the program")
    if not reaches_google:
        emulator_host()


def readable_by_nodes(spec: ClusterSpec, inputs: tuple[DataInput, ...]) -> ClusterSpec:
    """The stack with its nodes allowed to read every input's bucket (on GCP the program grants
    their account roles/storage.objectViewer there)."""
    if not inputs:
        return spec
    buckets = tuple(sorted({*spec.data_buckets, *(i.bucket for i in inputs)}))
    return spec.model_copy(update={"data_buckets": buckets})


def emulator_host() -> str:
    """The controller's GCS emulator, where local stacks' data buckets live."""
    emulator = os.environ.get("STORAGE_EMULATOR_HOST", "")
    if not emulator:
        raise ConfigError("data: the local stack does not reach Google Cloud Storage; serve the "
                          "buckets from a GCS emulator on this machine "
                          "(STORAGE_EMULATOR_HOST=http://127.0.0.1:<port>)")
    if urlparse(emulator).hostname not in LOOPBACK:
        raise ConfigError(f"STORAGE_EMULATOR_HOST {emulator}: the local stack reads data from this "
                          "machine only (http://127.0.0.1:<port>)")
    return emulator


def client(endpoint: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(project="trainctl-local", credentials=AnonymousCredentials(),
                          client_options={"api_endpoint": endpoint})


def load_into_stack(inventory: Inventory, inputs: tuple[DataInput, ...],
                    echo: Callable[[str], None]) -> int:
    """The inputs' objects copied from the controller's emulator into the stack's where that
    does not hold them already (same name and CRC32C); returns how many were copied."""
    assert inventory.storage_emulator_host
    source, target = client(emulator_host()), client(inventory.storage_emulator_host)
    copied = 0
    for item in inputs:
        bucket = target.bucket(item.bucket)
        if not bucket.exists():
            target.create_bucket(item.bucket)
        held = {b.name: b.crc32c for b in target.list_blobs(item.bucket, prefix=item.prefix)}
        wanted = [b for b in source.list_blobs(item.bucket, prefix=item.prefix) if held.get(b.name) != b.crc32c]
        if not wanted and not held:
            raise ConfigError(f"data: {item.source} holds no objects (in the GCS emulator at "
                              f"{emulator_host()})")

        def copy(blob: Any, bucket: Any = bucket) -> None:
            bucket.blob(blob.name).upload_from_string(blob.download_as_bytes(),
                                                      content_type=blob.content_type)

        with ThreadPoolExecutor(max_workers=COPIERS) as pool:
            list(pool.map(copy, wanted))
        copied += len(wanted)
    echo(f"[trainctl] data: {copied} object(s) loaded into the stack's bucket emulator")
    return copied


def stage_inputs(inventory: Inventory, inputs: tuple[DataInput, ...], log_dir: Any, *, reaches_google: bool,
                 echo: Callable[[str], None], report: Callable[..., None] | None = None) -> list:
    """The run's data staging: local stacks' buckets loaded first, then every node stages."""
    from bootstrap.data_staging import no_report, stage_data, summary

    if not reaches_google:
        load_into_stack(inventory, inputs, echo)
    results = stage_data(inventory, inputs, log_dir, report=report or no_report)
    for result in results:
        echo(f"[trainctl] data on {result.node}: {summary(result)}")
    return results
