"""How long collecting a run's artifacts will take, kept back from its budget's max_usd while it
trains: a run saving a checkpoint every epoch has more to collect the longer it runs (one run
collecting 120 checkpoints took 110 s), and the nodes are billed until they are down.

The estimate is what there is to collect, from a listing of the job dir (the same artifacts
`collect` would fetch): each object at the time this run's own request to the bucket took (the
listing's), or DEFAULT_SECONDS_PER_OBJECT before one was measured, plus its bytes at
BYTES_PER_SECOND. Collect fetches small objects concurrently, so counting them one request after
another errs on the side of stopping early."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

from trainctl.jobs.collect import artifact_objects
from trainctl.jobs.experiment_spec import from_workdir
from trainctl.jobs.spending import Spending

DEFAULT_SECONDS_PER_OBJECT = 1.0  # the 120-checkpoint collect above: 110 s
BYTES_PER_SECOND = 25e6  # a conservative download rate from the bucket (not measured)
LOOK_EVERY_SECONDS = 15.0


@dataclass(frozen=True)
class Pending:
    """What a collect would fetch now, and what one request to the bucket took."""
    objects: int
    bytes: int
    request_seconds: float | None = None

    def seconds(self) -> float:
        per_object = DEFAULT_SECONDS_PER_OBJECT if self.request_seconds is None else self.request_seconds
        return self.objects * per_object + self.bytes / BYTES_PER_SECOND

    def describe(self) -> str:
        return f"collecting {self.objects} object(s), {self.bytes / 1e6:.1f} MB: ~{self.seconds():.0f} s"


def pending(fs: Any, job_dir: str, artifacts: tuple[str, ...]) -> Pending:
    root = fs._strip_protocol(job_dir).rstrip("/")
    fs.invalidate_cache(root)  # gcsfs keeps listings: this one must be new
    began = time.monotonic()
    listed = fs.find(root, detail=True)
    took = time.monotonic() - began
    paths = {p for a in artifacts if from_workdir(a) is None for p in artifact_objects(listed, root, a)}
    return Pending(len(paths), sum(int(listed[p].get("size") or 0) for p in paths), took)


def reserve_once(spending: Spending, fs: Any, job_dir: str, artifacts: tuple[str, ...]) -> Pending:
    found = pending(fs, job_dir, artifacts)
    spending.reserve_for_collect(found.seconds(), found.describe())
    return found


@contextlib.contextmanager
def reserving_collect(spending: Spending, fs: Any, job_dir: str, artifacts: tuple[str, ...],
                      every: float = LOOK_EVERY_SECONDS) -> Iterator[None]:
    """While the block runs, the job dir is looked at every `every` seconds and the budget's
    stop moved earlier by what collecting it would take. `fs`: the bucket's filesystem, or a
    Future of it (the Collector's, warming up)."""
    if spending.limit is None or not any(from_workdir(a) is None for a in artifacts):
        yield
        return
    done = threading.Event()

    def look() -> None:
        while not done.wait(every):
            try:
                reserve_once(spending, fs.result() if hasattr(fs, "result") else fs, job_dir, artifacts)
            except Exception:  # noqa: BLE001 - a failed look keeps the last estimate
                continue

    watcher = threading.Thread(target=look, name="collect-reserve", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
