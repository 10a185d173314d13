"""One node's bootstrap: its plan's steps in order over one pinned SSH connection, each
skipped when the fingerprint the node stores says it is unchanged, its output in the node's log.

Code reaches the node by the cheapest way its state allows: nothing, a delta archive sent
alongside `ready`, a delta after it, or rsync (started before `ready` on a fresh node).
"""

from __future__ import annotations

import codecs
import subprocess
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable

from bootstrap.plan import (BASE_DIFFERS, MAX_DRIVER_REBOOTS, NodePlan, Step, delta_sync_command,
                            parse_fingerprints, record_fingerprint)
from bootstrap.remote_stop import Interrupt, marked, stop_over
from bootstrap.ssh import open_connection
from bootstrap.synced_nodes import SyncedNodes
from bootstrap.treesync import TreeCache
from infra.retry import on_results
from infra.providers.inventory import Inventory, Node

RSYNC_RETRIES = 3
REBOOT_EXIT = 75  # the drivers step asks for a reboot (kernel module) and is rerun after it

Reporter = Callable[..., None]


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

    def log_tail(self, lines: int = 12) -> str:
        if not self.log_path or not self.log_path.exists():
            return self.error
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class StepFailed(Exception):
    def __init__(self, exit_code: int | None, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class _Tee:
    """A remote command's output: into the node's log, and kept for parsing."""

    def __init__(self, log: IO[str]) -> None:
        self.log = log
        self.chunks: list[str] = []

    def write(self, data: str) -> int:
        self.log.write(data)
        self.chunks.append(data)
        return len(data)

    def flush(self) -> None:
        self.log.flush()

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@dataclass
class TreeSource:
    """The code tree as listed for this bootstrap, and the cache of earlier listings that
    deltas are made from."""
    listing: str
    cache: TreeCache


@dataclass
class Plans:
    """Every node's steps; `trees` is None where code and environment are in the image."""
    by_node: dict[str, NodePlan]
    trees: TreeSource | None


class NodeRunner:
    def __init__(self, inventory: Inventory, node: Node, plans: Future[Plans], log: IO[str], report: Reporter,
                 ready_timeout: float, prefetched: Future | None,
                 synced: SyncedNodes | None = None, early_sync: Future[tuple[int, str]] | None = None,
                 interrupt: Interrupt | None = None) -> None:
        self.interrupt = interrupt or Interrupt()
        self.interrupt.join(self)
        self.plans = plans
        self.trees: TreeSource | None = None
        self.synced = synced
        self.early_sync = early_sync
        self.inventory = inventory
        self.node = node
        self.plan: NodePlan
        self.connect_error: Exception | None = None
        self.delta_with_ready = False
        self.log = log
        self.report = report
        self.ready_timeout = ready_timeout
        self.prefetched = prefetched
        self.conn = None
        self.stored: dict[str, str] = {}

    def remote(self, command: str) -> tuple[int, str]:
        """`command` on the node, its output (stdout and stderr as they come) into the node's
        log as it arrives. A session of fabric's connection, read directly: fabric's `run`
        (invoke's runner threads) added ~10 ms to each command, which a node's whole re-run is
        made of (measured with a 1-node stack: 56 vs 46 ms for one `echo`)."""
        assert self.conn is not None and self.conn.transport is not None
        tee = _Tee(self.log)
        decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        channel = self.conn.transport.open_session()
        try:
            channel.set_combine_stderr(True)
            self._start(channel, command)
            while chunk := channel.recv(65536):
                tee.write(decode(chunk))
            tee.write(decode(b"", final=True))
            return channel.recv_exit_status(), tee.text
        finally:
            channel.close()

    def connect(self) -> None:
        self.conn = open_connection(self.inventory, self.node,
                                    deadline=time.monotonic() + self.ready_timeout)

    def _start(self, channel, command: str) -> None:
        """Start a step's command, marked as this bootstrap's; never once it is interrupted (an
        interrupt that came while it started stops it too)."""
        if self.interrupt.event.is_set():
            raise StepFailed(None, "interrupted")
        channel.exec_command(marked(command, self.interrupt.marker))
        if self.interrupt.event.is_set():
            self.stop_steps(self.interrupt.marker)

    def stop_steps(self, marker: str) -> None:
        """End this bootstrap's processes on the node (the SSH session's end would not)."""
        stop_over(self.conn, marker, self.log)

    def unchanged(self, step: Step) -> bool:
        return (step.fingerprint is not None and step.name not in self.plan.forced
                and self.stored.get(step.name) == step.fingerprint)

    def run_step(self, step: Step) -> str:
        if step.name == "ready" and self.connect_error is not None:
            raise self.connect_error
        if step.name == "sync" and self.delta_with_ready:
            self.log.write("delta archive applied alongside `ready`\n")
            return "done"
        if self.unchanged(step):
            self.log.write("unchanged: skipped\n")
            if step.name == "sync" and self.synced:
                self.synced.mark(self.node.name, step.fingerprint)
            return "skipped"
        if step.note == "not needed":  # decided by the plan (no GPU): no round trip
            self.log.write(f"{step.command}\n")
            return "not needed"
        if step.name == "env" and self.prefetched is not None:
            self.prefetched.result()  # the shared cache must be full before nodes install
        if step.name == "sync":
            code = self._sync(step)
        else:
            assert isinstance(step.command, str)
            delta = self._start_delta() if step.name == "ready" else None
            code, output = self.remote(step.command)
            reboots = 0
            # The installer may ask for a reboot per stage. The node counts them and fails
            # by itself after MAX_DRIVER_REBOOTS; this bound also holds if its count is lost.
            while step.name == "drivers" and code == REBOOT_EXIT and reboots < MAX_DRIVER_REBOOTS:
                code, output = self._reboot_and_rerun(step)
                reboots += 1
            if step.name == "ready" and code == 0:
                self.stored = parse_fingerprints(output)
            if delta is not None:
                self._finish_delta(delta)
        if code != 0:
            raise StepFailed(code, "command exited non-zero")
        return "not needed" if step.note == "not needed" else "done"

    def _reboot_and_rerun(self, step: Step) -> tuple[int, str]:
        self.report(self.node.name, step.name, "running", "rebooting for the driver")
        self.remote("sudo -n reboot || reboot")
        assert self.conn is not None
        self.conn.close()
        time.sleep(10)
        self.connect()
        assert isinstance(step.command, str)
        return self.remote(step.command)

    def _start_delta(self) -> Future[tuple[int, str, str]] | None:
        """A node this controller synced last time most likely still holds that tree: the delta
        from it goes out alongside `ready`, on a channel of its own, applied only where the node
        holds exactly that tree (a one-file change then costs no round trip of its own)."""
        sync = next((s for s in self.plan.steps if s.name == "sync"), None)
        base = self.synced.last(self.node.name) if self.synced else None
        if (sync is None or base is None or base == sync.fingerprint or self.trees is None
                or self.early_sync is not None or "sync" in self.plan.forced):
            return None
        assert sync.fingerprint is not None and self.conn is not None and self.conn.transport is not None
        payload = self.trees.cache.payload(base, sync.fingerprint, self.trees.listing)
        if payload is None:
            return None
        data, gone = payload
        command, fingerprint = delta_sync_command(self.node, gone, sync.fingerprint, base=base), sync.fingerprint
        done: Future[tuple[int, str, str]] = Future()

        def send() -> None:  # opening the channel waits for the node's sshd: not on ready's path
            try:
                code, errors = self._send(command, data)
                done.set_result((code, errors, fingerprint))
            except BaseException as exc:
                done.set_exception(exc)

        threading.Thread(target=send, name=f"delta-{self.node.name}", daemon=True).start()
        return done

    def _finish_delta(self, delta: Future[tuple[int, str, str]]) -> None:
        try:
            code, errors, fingerprint = delta.result()
        except Exception as exc:  # the regular sync decides after `ready`
            self.log.write(f"delta alongside `ready` failed: {type(exc).__name__}: {exc}\n")
            return
        if errors:
            self.log.write(errors)
        if code == 0:
            self.stored["sync"] = fingerprint
            self.delta_with_ready = True
            if self.synced:
                self.synced.mark(self.node.name, fingerprint)
        elif code != BASE_DIFFERS:
            self.log.write(f"delta alongside `ready` exited {code}: syncing after it\n")

    def _sync(self, step: Step) -> int:
        code = self._sync_tree(step)
        if code == 0 and self.synced:
            self.synced.mark(self.node.name, step.fingerprint)
        return code

    def _sync_tree(self, step: Step) -> int:
        assert step.fingerprint is not None
        record = record_fingerprint(step.name, self.node, step.fingerprint)
        if self.early_sync is not None:
            early, self.early_sync = self.early_sync, None
            code, output = early.result()
            self.log.write(f"rsync, started alongside `ready` (a node this controller never synced)\n{output}")
            if code == 0:
                return self.remote(record)[0]
            self.log.write(f"early rsync exited {code}: syncing again now that the node is ready\n")
        have = self.stored.get("sync")
        payload = self.trees.cache.payload(have, step.fingerprint, self.trees.listing) if self.trees else None
        if payload is None:
            self.log.write("rsync (fresh node, or no listing of its tree)\n")
            code = self._local(step)
            return self.remote(record)[0] if code == 0 else code
        data, gone = payload
        self.log.write(f"delta archive of {len(data)} bytes, {len(gone)} deletion(s)\n")
        return self._upload(delta_sync_command(self.node, gone, step.fingerprint), data)

    def _upload(self, command: str, data: bytes) -> int:
        code, errors = self._send(command, data)
        if errors:
            self.log.write(errors)
        return code

    def _send(self, command: str, data: bytes) -> tuple[int, str]:
        """`command` on the node with `data` on its stdin: its exit code and stderr."""
        assert self.conn is not None and self.conn.transport is not None
        channel = self.conn.transport.open_session()
        try:
            self._start(channel, command)
            channel.sendall(data)
            channel.shutdown_write()
            errors = channel.makefile_stderr("rb").read().decode(errors="replace")
            return channel.recv_exit_status(), errors
        finally:
            channel.close()

    def _local(self, step: Step) -> int:
        assert isinstance(step.command, list)
        command = step.command
        # rsync 12 (protocol stream) and 255 (ssh connection) are worth another try.
        return on_results(lambda code: code in (12, 255), attempts=RSYNC_RETRIES)(
            lambda: subprocess.run(command, stdout=self.log, stderr=subprocess.STDOUT).returncode)

    def run(self, result: NodeResult) -> None:
        try:
            self.report(self.node.name, "ready", "running")
            try:  # while the controller lists the tree (the plan's fingerprints need it)
                self.connect()
            except Exception as exc:  # the ready step's failure, reported as such below
                self.connect_error = exc
            plans = self.plans.result()
            self.plan, self.trees = plans.by_node[self.node.name], plans.trees
            for step in self.plan.steps:
                if self.interrupt.event.is_set():
                    return
                self.report(self.node.name, step.name, "running")
                self.log.write(f"--- {step.name}\n")
                self.log.flush()
                try:
                    status = self.run_step(step)
                except StepFailed as exc:
                    result.failed_step, result.exit_code, result.error = step.name, exc.exit_code, str(exc)
                except Exception as exc:  # refused host key, timeout, connection lost
                    self.log.write(f"error: {type(exc).__name__}: {exc}\n")
                    result.failed_step, result.error = step.name, f"{type(exc).__name__}: {exc}"
                if result.failed_step and self.interrupt.event.is_set():
                    result.statuses[step.name] = result.error = "interrupted"
                    self.report(self.node.name, step.name, "interrupted")
                    return
                if result.failed_step:
                    result.statuses[step.name] = "failed"
                    detail = f"exit {result.exit_code}" if result.exit_code is not None else result.error
                    self.report(self.node.name, step.name, "failed", detail)
                    return
                result.statuses[step.name] = status
                self.report(self.node.name, step.name, status)
        finally:
            if self.early_sync is not None:  # not taken (ready failed, or sync was skipped):
                self.early_sync.exception()  # never leave an rsync writing behind us
            if self.conn is not None:
                self.conn.close()
