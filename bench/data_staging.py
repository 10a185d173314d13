"""Data staging onto 4 real local nodes against a plain parallel copy of the same objects, both
measured in this one run, from the same bucket (the stack's GCS emulator).

  dataset    2,000 objects of 100 kB (200 MB) under gs://<stack bucket>/bench-ds/
  floor      the same objects copied on every node at once by a plain stdlib script over ssh:
             one JSON API listing, then 16 threads of urllib GETs of each object's media URL
             (median of 3, alternating with the stagings)
  staging    trainctl's data staging (bootstrap/data_staging.py): every node at once, each
             copying with google-cloud-storage's transfer manager (16 threads, checksums
             checked): onto fresh nodes (their stager environment made first, offline from the
             uv cache), into a fresh folder (environment there), and again (copies nothing:
             same generations) / the floor, which has no cache and copies everything each time
Run as root: TRAINCTL_HOME=/var/lib/trainctl-bench .venv/bin/python bench/data_staging.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bootstrap.data_inputs import DataInput, data_dir  # noqa: E402
from bootstrap.data_staging import stage_data  # noqa: E402
from bootstrap.ssh import openssh_command  # noqa: E402
from infra.providers import realizers  # noqa: E402
from infra.providers.inventory import Inventory, Node  # noqa: E402
from infra.spec.stack_config import load_stack  # noqa: E402

STACK = "bench-data"
NODES = 4
OBJECTS = int(os.environ.get("BENCH_OBJECTS", "2000"))
SIZE = 100_000
PREFIX = "bench-ds/"

# The floor: what any script would do, with nothing but the standard library.
PLAIN = r"""
import json, os, sys, urllib.parse, urllib.request
from concurrent.futures import ThreadPoolExecutor
endpoint, bucket, prefix, dest = sys.argv[1:5]
items, token = [], None
while True:
    query = {"prefix": prefix, **({"pageToken": token} if token else {})}
    with urllib.request.urlopen(f"{endpoint}/storage/v1/b/{bucket}/o?" + urllib.parse.urlencode(query)) as r:
        page = json.load(r)
    items += page.get("items", [])
    token = page.get("nextPageToken")
    if not token:
        break
def get(item):
    target = os.path.join(dest, item["name"][len(prefix):])
    os.makedirs(os.path.dirname(target), exist_ok=True)
    name = urllib.parse.quote(item["name"], safe="")
    with urllib.request.urlopen(f"{endpoint}/storage/v1/b/{bucket}/o/{name}?alt=media") as r, open(target, "wb") as f:
        f.write(r.read())
with ThreadPoolExecutor(16) as pool:
    list(pool.map(get, items))
print(len(items))
"""


def fill(inventory: Inventory) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    assert inventory.storage_emulator_host
    client = storage.Client(project="bench", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": inventory.storage_emulator_host})
    bucket = client.bucket(inventory.bucket_uri[len("gs://"):])
    payload = os.urandom(SIZE)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: bucket.blob(f"{PREFIX}{i:05d}.bin").upload_from_string(payload[i % 97:] + payload[:i % 97]),
                      range(OBJECTS)))


def plain_copy(inventory: Inventory) -> float:
    bucket = inventory.bucket_uri[len("gs://"):]

    def one(node: Node) -> None:
        dest = f"{data_dir(node)}/plain-{time.monotonic_ns()}"
        remote = " ".join(["python3", "-c", _quote(PLAIN), inventory.node_env["STORAGE_EMULATOR_HOST"],
                           bucket, PREFIX, dest]) + f"; rm -rf {dest}"
        done = subprocess.run([*openssh_command(inventory, node), node.ssh_host, remote],
                              capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout.strip() == str(OBJECTS), done.stdout + done.stderr

    start = time.monotonic()
    with ThreadPoolExecutor(len(inventory.nodes)) as pool:
        list(pool.map(one, inventory.nodes))
    return time.monotonic() - start


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def staging(inventory: Inventory, logs: Path, path: str = "ds") -> tuple[float, int]:
    inputs = (DataInput(source=f"{inventory.bucket_uri}/{PREFIX}", path=path),)
    start = time.monotonic()
    results = stage_data(inventory, inputs, logs)
    return time.monotonic() - start, sum(r.copied for r in results)


def main() -> None:
    spec = load_stack("local", name=STACK, overrides={"nodes": NODES})
    realizer = realizers.for_spec(spec)
    inventory = realizer.up(spec)
    try:
        started = time.monotonic()
        fill(inventory)
        print(f"dataset: {OBJECTS} objects x {SIZE // 1000} kB into {inventory.bucket_uri}/{PREFIX} "
              f"({time.monotonic() - started:.1f} s)")
        with tempfile.TemporaryDirectory() as logs:
            # alternating, so neither side has the warmer machine
            floors = [plain_copy(inventory)]
            first, copied = staging(inventory, Path(logs) / "first")
            floors.append(plain_copy(inventory))
            copy_only, copied_again = staging(inventory, Path(logs) / "fresh", path="ds-fresh")
            floors.append(plain_copy(inventory))
            rerun, recopied = staging(inventory, Path(logs) / "rerun")
        floor = statistics.median(floors)
        print(f"floor (plain parallel copy, {NODES} nodes): median {floor:.1f} s of "
              + ", ".join(f"{f:.1f}" for f in floors))
        print(f"staging, fresh nodes (stager environment made, then copied): {first:.1f} s, {copied} objects copied")
        print(f"staging into a fresh folder (environment there): {copy_only:.1f} s, {copied_again} objects copied")
        print(f"staging again (same generations): {rerun:.1f} s, {recopied} objects copied")
        print(f"fresh nodes / floor:   {first / floor:.2f}")
        print(f"fresh folder / floor:  {copy_only / floor:.2f}")
        print(f"again / floor:         {rerun / floor:.3f}")
    finally:
        realizer.down(STACK, force=True)


if __name__ == "__main__":
    main()
