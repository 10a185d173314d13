"""A run's per-node logs as `trainctl logs` prints them, and its outcome for `status --run`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from infra.errors import ConfigError

RESULT_FILE = "result.json"  # written by the launcher when a run ends, however it ends
POLL_SECONDS = 0.5


def result_path(runs_dir: Path, run_id: str) -> Path:
    return runs_dir / run_id / "logs" / "launch" / RESULT_FILE


def outcome(runs_dir: Path, run_id: str) -> str:
    """The run's result as JSON; a run without one is still going (or was stopped hard)."""
    result = result_path(runs_dir, run_id)
    if result.exists():
        return result.read_text()
    if (runs_dir / run_id).is_dir():
        return json.dumps({"run_id": run_id, "state": "running (or stopped without a result)"})
    raise ConfigError(f"no run {run_id!r} under {runs_dir}")


def print_logs(runs_dir: Path, run_id: str, out: Callable[[str], None], *, node: str | None = None,
               follow: bool = False, ended: Callable[[], bool] | None = None) -> None:
    """Everything logged so far; with follow, what comes next too, until the run's result is
    written, or `ended` says so (a detached run, which collects and tears down after its
    result), as `tail -f` would, but ending with the run."""
    base = runs_dir / run_id / "logs"
    if not base.is_dir():
        raise ConfigError(f"no logs for run {run_id!r} under {runs_dir}")
    offsets: dict[Path, int] = {}

    def drain() -> None:
        for path in sorted(base.rglob("*.log")):
            if node and path.stem != node:
                continue
            with open(path, errors="replace") as fh:
                fh.seek(offsets.get(path, 0))
                chunk = fh.read()
                offsets[path] = fh.tell()
            if chunk:
                if not follow:
                    out(f"==> {path} <==")
                out(chunk.rstrip("\n"))

    drain()
    done = result_path(runs_dir, run_id)
    finished = ended or done.exists
    while follow and not finished():
        time.sleep(POLL_SECONDS)
        drain()
    if follow:
        drain()
