"""Run bootstrap plans on every node in parallel; one node's failure never hides another's.

Each node works through its steps in order over one pinned SSH connection; nodes run side by
side up to a concurrency cap. When all have finished, failures are reported together, each with
its node, step, exit code and the tail of its log.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from bootstrap.plan import SKIPPED_MARK, STEPS, BootstrapSpec, NodePlan, Step, plan, prefetch_argv
from bootstrap.ssh import open_connection
from infra.inventory import Inventory

DEFAULT_CONCURRENCY = 32
TRANSIENT_RETRIES = 3


@dataclass
class NodeResult:
    node: str
    statuses: dict[str, str] = field(default_factory=dict)
    failed_step: str | None = None
    exit_code: int | None = None
    error: str = ""
    log_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.failed_step is None

    def log_tail(self, lines: int = 15) -> str:
        if not self.log_path or not self.log_path.exists():
            return self.error
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class BootstrapFailed(RuntimeError):
    def __init__(self, failures: list[NodeResult]) -> None:
        self.failures = failures
        parts = []
        for f in failures:
            code = f" (exit {f.exit_code})" if f.exit_code is not None else ""
            tail = "\n      ".join(f.log_tail().splitlines())
            parts.append(f"  {f.node}: step {f.failed_step} failed{code}: {f.error}\n      {tail}")
        super().__init__(f"bootstrap failed on {len(failures)} node(s):\n" + "\n".join(parts))


class PrefetchFailed(RuntimeError):
    pass


def _prefetch(inventory: Inventory, spec: BootstrapSpec, log_dir: Path) -> None:
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    job = prefetch_argv(inventory, spec, uv or "uv")
    if job is None:
        return
    argv, env, _seed = job
    with open(log_dir / "controller-prefetch.log", "a") as log:
        proc = subprocess.run(argv, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise PrefetchFailed(f"filling the nodes' package cache on the controller failed "
                             f"(exit {proc.returncode}); see {log_dir / 'controller-prefetch.log'}")


def _noop(node: str, step: str, status: str, detail: str = "") -> None:
    pass


def run_node(inventory: Inventory, node_plan: NodePlan, log_dir: Path, report=_noop,
             ready_timeout: float = 300.0, prefetched: Future | None = None) -> NodeResult:
    node = node_plan.node
    result = NodeResult(node.name, log_path=log_dir / f"{node.name}.log")
    with open(result.log_path, "a") as log:
        log.write(f"=== bootstrap {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        conn = None
        try:
            for step in node_plan.steps:
                report(node.name, step.name, "running")
                log.write(f"--- {step.name}\n")
                log.flush()
                try:
                    if step.name == "ready":
                        conn = open_connection(inventory, node,
                                               deadline=time.monotonic() + ready_timeout)
                    if step.name == "env" and prefetched is not None:
                        prefetched.result()  # the shared cache must be full before nodes install
                    if step.where == "controller":
                        code, skipped = _run_local(step, log), False
                    else:
                        assert conn is not None
                        code, skipped = _run_remote(conn, step, log)
                except Exception as exc:  # connection lost, refused host key, timeout
                    log.write(f"error: {exc}\n")
                    result.statuses[step.name] = "failed"
                    result.failed_step, result.error = step.name, str(exc)
                    report(node.name, step.name, "failed", str(exc)[:120])
                    return result
                if code != 0:
                    result.statuses[step.name] = "failed"
                    result.failed_step, result.exit_code = step.name, code
                    result.error = "command exited non-zero"
                    report(node.name, step.name, "failed", f"exit {code}")
                    return result
                status = "skipped" if skipped else ("not needed" if step.note == "not needed" else "done")
                result.statuses[step.name] = status
                report(node.name, step.name, status)
        finally:
            if conn is not None:
                conn.close()
    return result


def _run_local(step: Step, log: IO[str]) -> int:
    assert isinstance(step.command, list)
    for attempt in range(TRANSIENT_RETRIES):
        proc = subprocess.run(step.command, stdout=log, stderr=subprocess.STDOUT, text=True)
        # rsync 12 (protocol stream) and 255 (ssh connection) are worth another try.
        if proc.returncode not in (12, 255):
            return proc.returncode
        time.sleep(0.5 * 2 ** attempt)
    return proc.returncode


class _Capture:
    """Collects a remote step's output into the node log, watching for the skip mark."""

    def __init__(self, log: IO[str]) -> None:
        self.log = log
        self.skipped = False

    def write(self, data: str) -> int:
        if SKIPPED_MARK in data:
            self.skipped = True
            data = data.replace(SKIPPED_MARK, "(unchanged: skipped)")
        self.log.write(data)
        return len(data)

    def flush(self) -> None:
        self.log.flush()


def _run_remote(conn, step: Step, log: IO[str]) -> tuple[int, bool]:
    assert isinstance(step.command, str)
    capture = _Capture(log)
    result = conn.run(step.command, warn=True, hide=False, out_stream=capture, err_stream=capture,
                      in_stream=False)
    return result.exited, capture.skipped


def bootstrap(inventory: Inventory, spec: BootstrapSpec, log_dir: Path, *,
              nodes: list[str] | None = None, concurrency: int = DEFAULT_CONCURRENCY,
              report=_noop) -> list[NodeResult]:
    log_dir.mkdir(parents=True, exist_ok=True)
    plans = plan(inventory, spec, inventory.select(nodes))
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(plans))) + 1) as pool:
        prefetched = pool.submit(_prefetch, inventory, spec, log_dir)
        results = list(pool.map(
            lambda p: run_node(inventory, p, log_dir, report, spec.ready_timeout, prefetched), plans))
    failures = [r for r in results if not r.ok]
    if failures:
        raise BootstrapFailed(failures)
    return results


__all__ = ["bootstrap", "BootstrapFailed", "NodeResult", "STEPS"]
