"""Run bootstrap plans on every node in parallel; one node's failure never hides another's.

Each node works through its steps in order over one pinned SSH connection; nodes run side by
side up to a concurrency cap. `ready` also reports the fingerprints stored on the node, so an
unchanged step is skipped without another round trip. When all nodes have finished, failures
are reported together, each with its node, step, exit code and the tail of its log.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable

from bootstrap.plan import (BASE_DIFFERS, MAX_DRIVER_REBOOTS, BootstrapSpec, NodePlan, Step, check_inputs,
                            delta_sync_command, parse_fingerprints, plan, record_fingerprint, rsync_argv, seed_argv,
                            tree_digest, tree_listing)
from bootstrap.remote_stop import INTERRUPT_GRACE_SECONDS, Interrupt, marked, stop_marked
from bootstrap.ssh import open_connection
from bootstrap.treesync import TreeCache
from infra.errors import RemoteError
from infra.retry import on_results
from infra.providers.inventory import Inventory, Node

DEFAULT_CONCURRENCY = 32
RSYNC_RETRIES = 3
REBOOT_EXIT = 75  # the drivers step asks for a reboot (kernel module) and is rerun after it
FAILED_FILE = "failed-nodes.json"

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


class BootstrapFailed(RemoteError):
    title = "bootstrap failed"

    def __init__(self, failures: list[NodeResult]) -> None:
        self.failures = failures
        parts = []
        for f in failures:
            code = f" (exit {f.exit_code})" if f.exit_code is not None else ""
            tail = "\n      ".join(f.log_tail().splitlines())
            parts.append(f"  {f.node}: step {f.failed_step} failed{code}: {f.error}\n      {tail}")
        super().__init__(f"bootstrap failed on {len(failures)} node(s):\n" + "\n".join(parts)
                         + "\n  rerun only these with --retry-failed")


class PrefetchFailed(RemoteError):
    pass


def no_report(node: str, step: str, status: str, detail: str = "") -> None:
    pass


class StepFailed(Exception):
    def __init__(self, exit_code: int | None, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def controller_uv() -> str:
    return shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"


def fill_uv_cache(node_env: dict[str, str], spec: BootstrapSpec, log_path: Path) -> tuple[int, str]:
    """The requirements into the uv cache `node_env` names, installed once on the controller
    (seed_argv); returns the install's exit code and output, also appended to `log_path`."""
    argv, env, _seed = seed_argv(node_env, spec, controller_uv())
    argv, home = as_cache_owner(argv, Path(node_env["UV_CACHE_DIR"]))
    done = subprocess.run(argv, env={**os.environ, **env, **home}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace")
    with open(log_path, "a") as log:
        log.write(done.stdout)
    return done.returncode, done.stdout


def as_cache_owner(argv: list[str], cache: Path) -> tuple[list[str], dict[str, str]]:
    """The install runs as whoever owns the cache's folder (and with its HOME there): nodes
    whose user is not root link packages from a cache of their own uid (the kernel lets a user
    hardlink only files it owns), so the controller fills that cache as that uid."""
    try:
        owner = cache.parent.stat().st_uid
    except FileNotFoundError:
        return argv, {}
    if owner == os.geteuid() or os.geteuid() != 0:
        return argv, {}
    return (["setpriv", f"--reuid={owner}", f"--regid={owner}", "--clear-groups", *argv],
            {"HOME": str(cache.parent)})


def install_failure(requirements: str, output: str, log_path: Path) -> str:
    """Why uv could not install the requirements, in its own words (the resolver's `error:` and
    `cause:` lines, or the `×`/`╰─▶` report it draws on a terminal), then where the whole output is."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if UV_MARKER.match(line) and
                  not line.lower().startswith(("cause:", "hint:", "╰─▶"))), None)
    reason = ""
    for line in lines[start:] if start is not None else lines[-5:]:
        marker = UV_MARKER.match(line)
        text = line[marker.end():] if marker and not line.lower().startswith("hint:") else line
        # a marked line is uv's next statement; an unmarked one continues a line it wrapped
        glue = ": " if marker and reason and not reason.endswith((":", ".")) else " "
        reason = f"{reason}{glue}{text}" if reason else text
    return f"uv could not install {requirements}: {reason or 'no output'} (all of its output: {log_path})"


UV_MARKER = re.compile(r"(error:|cause:|hint:|×|╰─▶)\s*", re.IGNORECASE)


def _prefetch(inventory: Inventory, spec: BootstrapSpec, log_dir: Path) -> None:
    if not inventory.offline_nodes or not spec.requirements:
        return
    log = log_dir / "controller-prefetch.log"
    code, output = fill_uv_cache(inventory.node_env, spec, log)
    if code != 0:
        raise PrefetchFailed(install_failure(spec.requirements, output, log))


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


class SyncedNodes:
    """Which nodes of the stack this controller has put code on. A node it never synced gets its
    rsync started at once, alongside `ready` (a fresh node's tree is whole anyway); the others
    wait for `ready`, whose fingerprint chooses between nothing, a delta archive and rsync.
    A hint only: a wrong one costs the overlap, never correctness."""

    def __init__(self, stack: str) -> None:
        from infra.providers.stack_home import state_dir

        self.stack_dir = state_dir(stack)
        self.directory = self.stack_dir / "synced"

    def fresh(self, node: str) -> bool:
        return not (self.directory / node).exists()

    def last(self, node: str) -> str | None:
        """The tree this controller last put on the node (its sync fingerprint)."""
        try:
            return (self.directory / node).read_text().strip() or None
        except FileNotFoundError:
            return None

    def mark(self, node: str, fingerprint: str | None) -> None:
        if self.stack_dir.is_dir():  # never create a stack's state as a side effect
            self.directory.mkdir(exist_ok=True)
            (self.directory / node).write_text(fingerprint or "")

    def forget(self, nodes: list[str]) -> None:
        """Nodes that were replaced: their disks are new."""
        for node in nodes:
            (self.directory / node).unlink(missing_ok=True)


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
        transport = self.conn.transport if self.conn is not None else None
        if transport is None or not transport.is_active():
            return  # never connected, or the node is gone: nothing runs there for us
        try:
            channel = transport.open_session(timeout=5)
            try:
                channel.exec_command(stop_marked(marker, INTERRUPT_GRACE_SECONDS))
                channel.recv_exit_status()
            finally:
                channel.close()
        except Exception as exc:  # the node is unreachable: its step ends with its session
            self.log.write(f"stopping the step failed: {type(exc).__name__}: {exc}\n")

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


@dataclass
class TreeSource:
    listing: str
    cache: TreeCache


@dataclass
class Plans:
    by_node: dict[str, NodePlan]
    trees: TreeSource | None


def run_node(inventory: Inventory, node: Node, plans: Future[Plans], log_dir: Path, report: Reporter = no_report,
             ready_timeout: float = 300.0, prefetched: Future | None = None, synced: SyncedNodes | None = None,
             early_sync: Future[tuple[int, str]] | None = None, interrupt: Interrupt | None = None) -> NodeResult:
    log_path = log_dir / f"{node.name}.log"
    result = NodeResult(node.name, log_path=log_path)
    with open(log_path, "a") as log:
        log.write(f"=== bootstrap {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        NodeRunner(inventory, node, plans, log, report, ready_timeout, prefetched,
                   synced, early_sync, interrupt).run(result)
    return result


def start_early_syncs(pool: ThreadPoolExecutor, inventory: Inventory, spec: BootstrapSpec,
                      nodes: list[Node], synced: SyncedNodes) -> dict[str, Future[tuple[int, str]]]:
    """A node this controller never synced needs its whole tree whatever `ready` finds, and
    rsync needs nothing from `ready`: start it at once, before the tree is even listed, so the
    longest step of a first bootstrap overlaps the connection, the probe and the listing. Output
    is kept apart and logged when the node's sync step takes the result."""

    def rsync(argv: list[str]) -> tuple[int, str]:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace")
        return done.returncode, done.stdout

    return {node.name: pool.submit(rsync, rsync_argv(inventory, node, spec))
            for node in nodes if synced.fresh(node.name)}


def tree_cache_dir() -> Path:
    from infra.providers.stack_home import cache_dir

    return cache_dir() / "trees"


def failed_last_time(log_dir: Path) -> list[str]:
    path = log_dir / FAILED_FILE
    return json.loads(path.read_text()) if path.exists() else []


def bootstrap(inventory: Inventory, spec: BootstrapSpec, log_dir: Path, *,
              nodes: list[str] | None = None, concurrency: int = DEFAULT_CONCURRENCY,
              report: Reporter = no_report) -> list[NodeResult]:
    log_dir.mkdir(parents=True, exist_ok=True)
    check_inputs(spec)  # before the first rsync starts
    selected = inventory.select(nodes)
    synced = SyncedNodes(inventory.stack)
    workers = max(1, min(concurrency, len(selected)))
    def plans() -> Plans:
        if spec.image:  # code and environment are in the image
            return Plans({p.node.name: p for p in plan(inventory, spec, selected)}, None)
        listing = tree_listing(spec)
        cache = TreeCache(tree_cache_dir(), spec.code_dir)
        cache.save(tree_digest(spec, listing), listing)
        return Plans({p.node.name: p for p in plan(inventory, spec, selected, listing=listing)},
                     TreeSource(listing, cache))

    with ThreadPoolExecutor(max_workers=workers) as rsyncs, \
            ThreadPoolExecutor(max_workers=workers + 2) as pool:
        early: dict[str, Future[tuple[int, str]]] = {}
        prefetched: Future | None = None
        if not spec.image:
            early = start_early_syncs(rsyncs, inventory, spec, selected, synced)
            prefetched = pool.submit(_prefetch, inventory, spec, log_dir)
        # Nodes connect while the tree is listed: the listing is the plan's sync fingerprint,
        # and no node needs it before `ready` has answered.
        planned = pool.submit(plans)
        interrupt = Interrupt()
        running = [pool.submit(run_node, inventory, node, planned, log_dir, report, spec.ready_timeout,
                               prefetched, synced, early.get(node.name), interrupt) for node in selected]
        try:
            results = [f.result() for f in running]
        except BaseException:  # Ctrl-C, SIGTERM: the nodes' steps stop now, not when they are done
            interrupt.fire()
            raise
    failures = [r for r in results if not r.ok]
    (log_dir / FAILED_FILE).write_text(json.dumps([f.node for f in failures]))
    if failures:
        raise BootstrapFailed(failures)
    return results
