"""A trainer that costs nothing to start, for tests of what trainctl does around a program (its
phases, signals, isolation, cancellation), not of what torch or TensorFlow do.

Standard library only, so a node's environment needs no requirements and the program starts in
milliseconds. The experiment declares `framework: tensorflow` because that is trainctl's plain
per-node launch: each node runs the command itself (no torchrun agents, no rendezvous store),
with TF_CONFIG naming its task; nothing of TensorFlow is involved. The rank is read from
TF_CONFIG (chief 0, worker i is i + 1), or RANK and WORLD_SIZE where those are set.

It prints `epoch i/N ...` on rank 0 as the digits trainer does, fails on purpose like it
(--fail-at-epoch/--fail-rank/--fail-code), leaves with 143 on SIGTERM (with --checkpoint-on-stop,
rank 0 first writes checkpoints/step-<epoch>.json: the epoch it reached), and rank 0 writes
metrics.json and model/model.bin to the job dir: a gs:// job dir through the GCS JSON API's
media upload to $STORAGE_EMULATOR_HOST (the local stack's bucket), a plain path as a file. The
model is --model-mb MiB followed by the SHA-256 of those bytes, so whoever holds a copy can tell
whether it is whole (`is_whole`)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import threading
import urllib.parse
import urllib.request

EXIT_ON_SIGTERM = 128 + signal.SIGTERM
DIGEST_BYTES = 32


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--job-dir", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--epoch-sleep", type=float, default=0.0)
    p.add_argument("--fail-at-epoch", type=int, default=None)
    p.add_argument("--fail-rank", type=int, default=0)
    p.add_argument("--fail-code", type=int, default=3)
    p.add_argument("--model-mb", type=int, default=1)
    p.add_argument("--checkpoint-on-stop", action="store_true")
    return p.parse_args(argv)


def rank_and_world() -> tuple[int, int]:
    tf_config = os.environ.get("TF_CONFIG")
    if tf_config:
        config = json.loads(tf_config)
        world = sum(len(tasks) for tasks in config["cluster"].values())
        task = config["task"]
        return (0 if task["type"] == "chief" else int(task["index"]) + 1), world
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def model_bytes(megabytes: int) -> bytes:
    body = hashlib.shake_256(b"quick-trainer").digest(megabytes << 20)
    return body + hashlib.sha256(body).digest()


def is_whole(data: bytes, megabytes: int) -> bool:
    """Whether `data` is a complete model.bin of that size."""
    body, digest = data[:-DIGEST_BYTES], data[-DIGEST_BYTES:]
    return len(body) == megabytes << 20 and hashlib.sha256(body).digest() == digest


def write(job_dir: str, name: str, data: bytes) -> None:
    if not job_dir.startswith("gs://"):
        path = os.path.join(job_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
        return
    bucket, _, prefix = job_dir[len("gs://"):].partition("/")
    obj = "/".join(p for p in (prefix.strip("/"), name) if p)
    # objects.insert's simple upload, as googleapiclient/discovery_cache/documents/storage.v1.json
    # describes it: mediaUpload.protocols.simple.path "/upload/storage/v1/b/{bucket}/o", query
    # parameters uploadType ("media") and name (the object's, URL-encoded).
    host = os.environ.get("STORAGE_EMULATOR_HOST", "https://storage.googleapis.com").rstrip("/")
    url = f"{host}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={urllib.parse.quote(obj, safe='')}"
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        answer.read()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank, world = rank_and_world()
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    print(f"rank {rank}/{world}, job dir {args.job_dir}", flush=True)
    history = []
    for epoch in range(1, args.epochs + 1):
        loss = 1.0 / epoch
        history.append({"epoch": epoch, "train_loss": loss, "step": epoch})
        if rank == 0:
            print(f"epoch {epoch}/{args.epochs} loss {loss:.4f} step {epoch}", flush=True)
        if args.fail_at_epoch == epoch and rank == args.fail_rank:
            print(f"rank {rank}: failing on purpose at epoch {epoch}", flush=True)
            return args.fail_code
        if stopped.wait(args.epoch_sleep) or stopped.is_set():
            print(f"rank {rank}: stopping at epoch {epoch} (SIGTERM)", flush=True)
            if args.checkpoint_on_stop and rank == 0:
                write(args.job_dir, f"checkpoints/step-{epoch}.json", json.dumps({"step": epoch}).encode())
            return EXIT_ON_SIGTERM
    if rank == 0:
        metrics = {"epochs": args.epochs, "steps": args.epochs, "world_size": world, "history": history,
                   "model_mb": args.model_mb}
        write(args.job_dir, "metrics.json", json.dumps(metrics, indent=2).encode())
        write(args.job_dir, "model/model.bin", model_bytes(args.model_mb))
        print(f"final loss {history[-1]['train_loss']:.4f} after {args.epochs} steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
