"""Runs ON A NODE (sent over SSH, never imported by trainctl): copies gs:// prefixes to local
folders with google-cloud-storage, credentials as the node has them (its service account
through the metadata server on GCP; anonymous against STORAGE_EMULATOR_HOST).

    python stage.py '<json: [{"source": "gs://b/p/", "dest": "/abs/dir", "mount": false}, ...]>'

Each folder keeps a journal of what it holds (object name, generation, size): an object whose
generation and size are already there is not copied again, so a rerun copies nothing and an
interrupted staging resumes with what it had not finished. Objects are downloaded to a
temporary name and renamed, so a reader never sees half a file. A `mount` entry is mounted
read-only with Cloud Storage FUSE where the node has `gcsfuse`, and staged where it has not.
Progress goes to stdout as `TRAINCTL_STAGE <json>` lines; the last one is the summary.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from google.cloud import storage
from google.cloud.storage import transfer_manager

JOURNAL = ".trainctl-staged"
BATCH = 500  # objects per transfer-manager call: progress and the journal advance per batch
WORKERS = 16


def say(**fields):
    print("TRAINCTL_STAGE " + json.dumps(fields, separators=(",", ":")), flush=True)


def split(source):
    """(bucket, prefix); a prefix names a folder (gs://b/digits is gs://b/digits/, never digits2/)."""
    bucket, _, prefix = source[len("gs://"):].partition("/")
    return bucket, prefix if not prefix or prefix.endswith("/") else prefix + "/"


def read_journal(dest):
    held = {}
    try:
        with open(os.path.join(dest, JOURNAL)) as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:  # the last line of a staging cut short
                    continue
                held[entry["name"]] = entry
    except FileNotFoundError:
        pass
    return held


def local_path(dest, prefix, name):
    rel = name[len(prefix):].lstrip("/") if prefix else name
    if not rel or rel.startswith("../") or "/../" in rel or rel.endswith("/"):
        return None  # a folder placeholder, or a name that would leave the folder
    return os.path.join(dest, rel)


def still_held(entry, blob, path):
    return (entry is not None and entry["generation"] == blob.generation
            and entry["size"] == blob.size and os.path.isfile(path) and os.path.getsize(path) == blob.size)


def plan(client, source, dest):
    """(objects to copy, objects already here, names staged before and gone from the bucket, journal)"""
    bucket, prefix = split(source)
    held = read_journal(dest)
    wanted, keep = [], []
    for blob in client.list_blobs(bucket, prefix=prefix):
        path = local_path(dest, prefix, blob.name)
        if path is None:
            continue
        (keep if still_held(held.get(blob.name), blob, path) else wanted).append((blob, path))
    listed = {blob.name for blob, _ in wanted + keep}
    gone = [name for name in held if name not in listed]
    return wanted, keep, gone, held


def download(batch):
    for _, path in batch:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    # What the listing said, before a download can overwrite it from the response's headers
    # (an emulator that sends no x-goog-generation leaves the blob without one).
    listed = [(blob.name, blob.generation, blob.size) for blob, _ in batch]
    pairs = [(blob, path + ".part") for blob, path in batch]
    results = transfer_manager.download_many(pairs, worker_type=transfer_manager.THREAD,
                                             max_workers=WORKERS, raise_exception=False)
    done = []
    for (blob, path), (name, generation, size), result in zip(batch, listed, results):
        if isinstance(result, Exception):
            raise RuntimeError(f"gs://{blob.bucket.name}/{name}: {result}")
        os.replace(path + ".part", path)
        done.append({"name": name, "generation": generation, "size": size})
    return done


def restart_journal(dest, prefix, keep, gone, held):
    """Files of objects gone from the bucket removed (only those this journal staged), and the
    journal rewritten to what is here: a line cut short by a kill, and entries of older
    generations, go with it."""
    for name in gone:
        path = local_path(dest, prefix, name)
        if path and os.path.isfile(path):
            os.remove(path)
    path = os.path.join(dest, JOURNAL)
    with open(path + ".new", "w") as f:
        f.writelines(json.dumps(held[blob.name]) + "\n" for blob, _ in keep)
    os.replace(path + ".new", path)


def stage(client, source, dest):
    os.makedirs(dest, exist_ok=True)
    wanted, keep, gone, held = plan(client, source, dest)
    restart_journal(dest, split(source)[1], keep, gone, held)
    total = sum(b.size for b, _ in wanted)
    copied = copied_bytes = 0
    say(source=source, done=0, objects=len(wanted), bytes=0, total_bytes=total, kept=len(keep))
    with open(os.path.join(dest, JOURNAL), "a") as journal:
        for start in range(0, len(wanted), BATCH):
            for entry in download(wanted[start:start + BATCH]):
                journal.write(json.dumps(entry) + "\n")
                copied += 1
                copied_bytes += entry["size"]
            journal.flush()
            say(source=source, done=copied, objects=len(wanted), bytes=copied_bytes, total_bytes=total,
                kept=len(keep))
    return {"source": source, "dest": dest, "how": "staged", "copied": copied, "copied_bytes": copied_bytes,
            "kept": len(keep), "removed": len(gone)}


def mount(source, dest):
    bucket, prefix = split(source)
    os.makedirs(dest, exist_ok=True)
    if os.path.ismount(dest):
        return {"source": source, "dest": dest, "how": "mounted", "copied": 0, "copied_bytes": 0,
                "kept": 0, "removed": 0}
    argv = ["gcsfuse", "--implicit-dirs", "--o", "ro"]  # gcsfuse cfg/params.yaml: flag "o", "For readonly, use --o ro"
    if prefix.strip("/"):
        argv += ["--only-dir", prefix.strip("/")]
    subprocess.run(argv + [bucket, dest], check=True)
    return {"source": source, "dest": dest, "how": "mounted", "copied": 0, "copied_bytes": 0,
            "kept": 0, "removed": 0}


def main():
    entries = json.loads(sys.argv[1])
    client = storage.Client()
    started = time.monotonic()
    results = []
    with ThreadPoolExecutor(max_workers=max(1, len(entries))) as pool:
        futures = [pool.submit(mount, e["source"], e["dest"]) if e.get("mount") and shutil.which("gcsfuse")
                   else pool.submit(stage, client, e["source"], e["dest"]) for e in entries]
        results = [f.result() for f in futures]
    say(summary=results, seconds=round(time.monotonic() - started, 2))


if __name__ == "__main__":
    main()
