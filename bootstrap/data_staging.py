"""Data staging on every node at once: each node runs the stager (bootstrap/data_inputs.py) over
its pinned SSH connection, its progress lines turned into the node's progress as they arrive,
its whole output in the node's log. An interrupt stops the stager on every node (the files it
finished stay recorded: the next staging resumes from them).
"""

from __future__ import annotations

import codecs
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable

from bootstrap.data_inputs import DataInput, stage_command, stager_spec
from bootstrap.remote_stop import Interrupt, marked, stop_over
from bootstrap.ssh import open_connection
from bootstrap.uv_cache import prefetch
from infra.errors import RemoteError
from infra.providers.inventory import Inventory, Node

if TYPE_CHECKING:
    import fabric

PROGRESS_MARK = "TRAINCTL_STAGE "
STEP = "data"
CONNECT_SECONDS = 60.0
Reporter = Callable[..., None]


def no_report(node: str, step: str, status: str, detail: str = "") -> None:
    pass


@dataclass
class NodeStaging:
    """What one node's staging did: per input, how (staged or mounted), objects and bytes
    copied, objects it already held (same generation), files removed (gone from the bucket)."""
    node: str
    inputs: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    exit_code: int | None = None
    log_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and bool(self.inputs)

    @property
    def copied(self) -> int:
        return sum(int(i["copied"]) for i in self.inputs)

    @property
    def copied_bytes(self) -> int:
        return sum(int(i["copied_bytes"]) for i in self.inputs)

    @property
    def kept(self) -> int:
        return sum(int(i["kept"]) for i in self.inputs)

    def tail(self, lines: int = 12) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class DataStagingFailed(RemoteError):
    title = "data staging failed"

    def __init__(self, failures: list[NodeStaging]) -> None:
        self.failures = failures
        super().__init__("\n".join(f"{f.node}: exit {f.exit_code} (log {f.log_path})\n{f.tail()}"
                                   for f in failures))


def progress_detail(fields: dict) -> str:
    mb, total = fields["bytes"] / 1e6, fields["total_bytes"] / 1e6
    return (f"{fields['source']}: {fields['done']}/{fields['objects']} objects, {mb:.1f}/{total:.1f} MB"
            f" ({fields['kept']} already here)")


class NodeStager:
    """One node's staging over one SSH session; stoppable by the run's Interrupt."""

    def __init__(self, inventory: Inventory, node: Node, log: IO[str], report: Reporter,
                 interrupt: Interrupt) -> None:
        self.inventory, self.node, self.log, self.report = inventory, node, log, report
        self.interrupt = interrupt
        self.conn: fabric.Connection | None = None
        interrupt.join(self)

    def run(self, inputs: tuple[DataInput, ...]) -> NodeStaging:
        result = NodeStaging(self.node.name)
        conn = self.conn = open_connection(self.inventory, self.node, deadline=time.monotonic() + CONNECT_SECONDS)
        assert conn.transport is not None
        channel = conn.transport.open_session()
        try:
            channel.set_combine_stderr(True)
            channel.exec_command(marked(stage_command(self.inventory, self.node, inputs), self.interrupt.marker))
            self._follow(channel, result)
            result.exit_code = channel.recv_exit_status()
        finally:
            channel.close()
            conn.close()
        return result

    def _follow(self, channel, result: NodeStaging) -> None:
        decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        pending = ""
        while chunk := channel.recv(65536):
            text = decode(chunk)
            self.log.write(text)
            pending += text
            *lines, pending = pending.split("\n")
            for line in lines:
                self._line(line, result)
        self._line(pending + decode(b"", final=True), result)

    def _line(self, line: str, result: NodeStaging) -> None:
        if not line.startswith(PROGRESS_MARK):
            return
        fields = json.loads(line[len(PROGRESS_MARK):])
        if "summary" in fields:
            result.inputs, result.seconds = fields["summary"], fields["seconds"]
        else:
            self.report(self.node.name, STEP, "running", progress_detail(fields))

    def stop_steps(self, marker: str) -> None:
        stop_over(self.conn, marker, self.log)


def summary(result: NodeStaging) -> str:
    if any(i["how"] == "mounted" for i in result.inputs):
        return "mounted (gcsfuse)"
    return (f"{result.copied} objects copied ({result.copied_bytes / 1e6:.1f} MB), "
            f"{result.kept} already here, {result.seconds:.1f} s")


def stage_node(inventory: Inventory, node: Node, inputs: tuple[DataInput, ...], log_dir: Path,
               report: Reporter, interrupt: Interrupt) -> NodeStaging:
    log_path = log_dir / f"{node.name}.log"
    report(node.name, STEP, "running")
    with open(log_path, "a") as log:
        try:
            result = NodeStager(inventory, node, log, report, interrupt).run(inputs)
        except Exception as exc:  # unreachable node, SSH refused: that node's failure
            log.write(f"{type(exc).__name__}: {exc}\n")
            result = NodeStaging(node.name)
    result.log_path = log_path
    report(node.name, STEP, "done" if result.ok else "failed",
           summary(result) if result.ok else f"exit {result.exit_code}, see {log_path}")
    return result


def stage_data(inventory: Inventory, inputs: tuple[DataInput, ...], log_dir: Path, *,
               nodes: list[str] | None = None, report: Reporter = no_report) -> list[NodeStaging]:
    """Every input onto every (selected) node, all nodes at once; raises DataStagingFailed
    naming each node that failed, after the others finished."""
    log_dir.mkdir(parents=True, exist_ok=True)
    prefetch(inventory, stager_spec(), log_dir)  # offline nodes install the stager from the cache
    selected = inventory.select(nodes)
    interrupt = Interrupt()
    with ThreadPoolExecutor(max_workers=max(1, len(selected))) as pool:
        running = [pool.submit(stage_node, inventory, node, inputs, log_dir, report, interrupt)
                   for node in selected]
        try:
            results = [f.result() for f in running]
        except BaseException:  # Ctrl-C, SIGTERM: every node's stager stops now
            interrupt.fire()
            raise
    failures = [r for r in results if not r.ok]
    if failures:
        raise DataStagingFailed(failures)
    return results
