"""A node's (or pod's) output as lines: prefixed as `[node rN]:`, kept in its log file and its
last lines, and read for what torchrun's agent and the program say about their progress."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import IO, Callable

from trainctl.launchers import torchrun_agents
from trainctl.launchers.result import NodeOutcome


# A program's progress as it prints it ("... step 230 ..."), and where a resumed one starts
# ("resumed from ... step 230"): what a recovery redid, for programs that say so.
STEP_RE = re.compile(r"\bstep (\d+)\b")


RESUMED_RE = re.compile(r"\bresumed from\b.*\bstep (\d+)\b")
# Where a worker group starts, as programs say it first: "[GPU1] Epoch 0 | ...", "Resuming
# training from snapshot at Epoch 3" (PyTorch's DDP tutorial), "epoch 1/10", "step 0 loss ...".
START_RE = re.compile(r"\b(epoch|step)\s+(\d+)", re.IGNORECASE)
# How long a checkpoint took to write or to read back, as the reference trainers print it
# (trainers/checkpoint.py: saved_line, restored_line).
SAVED_RE = re.compile(r"\bcheckpoint saved in (\d+(?:\.\d+)?) s\b")
RESTORED_RE = re.compile(r"\bcheckpoint restored in (\d+(?:\.\d+)?) s\b")


def journal_path(log_path: Path) -> Path:
    """Beside the node's log: when each progress line came (`trainctl logs` reads *.log only)."""
    return log_path.with_suffix(".steps.jsonl")


class StepJournal:
    """The times of a program's progress lines, one JSON line each ({"t", "step"},
    {"t", "resumed"}, {"t", "checkpoint_save"} and {"t", "checkpoint_restore"} (seconds, ending at
    t), and {"t", "failed"} when torchrun reports a worker's failure), appended
    across attempts: the ledger's productive time and lost work are read from them (the lines
    themselves carry no time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: IO[str] | None = None

    def record(self, key: str, value: float) -> None:
        if self.file is None:
            self.file = open(self.path, "a")
        self.file.write(json.dumps({"t": round(time.time(), 3), key: value}) + "\n")
        self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class LinePrinter:
    """Splits a node's stream into lines, prefixes lines torchrun did not prefix, and keeps
    the node's log file and its last lines for error reports."""

    def __init__(self, node: str, log_path: Path, echo: Callable[[str], None], outcome: NodeOutcome,
                 on_worker_exit: Callable[[int], None] = lambda code: None,
                 direct_rank: int | None = None, quiet: threading.Event | None = None,
                 on_agent_change: Callable[[], None] | None = None):
        self.on_worker_exit = on_worker_exit
        # A torchrun agent's stream: its INFO lines are for the log and its state only (another
        # program's glog-style INFO lines, an `exec`'s, are shown as they are).
        self.on_agent_change = on_agent_change
        # Once set, torchrun's own lines go to the log only: once trainctl stops the run (a
        # cancel, a failure or preemption elsewhere) they are its shutdown traceback, not news.
        self.quiet = quiet
        # A program run without torchrun: all its lines are the worker's, prefixed here.
        self.direct_prefix = f"[{node} r{direct_rank}]:" if direct_rank is not None else None
        self.node = node
        self.log = open(log_path, "a")
        self.journal = StepJournal(journal_path(log_path))
        self.echo = echo
        self.outcome = outcome
        self.partial = ""
        self.lock = threading.Lock()

    def write(self, data: str) -> int:
        with self.lock:
            self.partial += data
            *lines, self.partial = self.partial.split("\n")
            for line in lines:
                self._emit(line)
        return len(data)

    def _emit(self, line: str) -> None:
        if self.direct_prefix:
            line = self.direct_prefix + line
        from_worker = line.startswith(f"[{self.node} ")
        shown = line if from_worker else f"[{self.node}] {line}"
        self.log.write(shown + "\n")
        if from_worker:
            self.outcome.worker_tail.append(shown)
            self.echo(shown)
            self._progress(line)
        else:
            self._agent_line(line, shown)

    def _agent_line(self, line: str, shown: str) -> None:
        state = torchrun_agents.state_after(line)
        if self.on_agent_change is None or not torchrun_agents.is_info(line):
            self.outcome.agent_tail.append(shown)
            if self.quiet is None or not self.quiet.is_set():
                self.echo(shown)
            match = torchrun_agents.WORKER_EXIT_RE.search(line)
            if match:
                self.journal.record("failed", int(match.group(1)))
                # Judged before its "failed" state shows: another node's thread, reading the
                # agents as its group finishes, would otherwise end the attempt on this failure
                # before its exit code and verdict (permanent, unfixable) were in.
                self.on_worker_exit(int(match.group(1)))
        if state is not None:
            if state == "running":  # a new worker group: its programs say again where they start
                self.outcome.start = None
            self.outcome.agent_state = state
            if self.on_agent_change is not None:
                self.on_agent_change()

    def _progress(self, line: str) -> None:
        start = START_RE.search(line) if self.outcome.start is None else None
        if start:
            self.outcome.start = (start.group(1).lower(), int(start.group(2)), "resum" in line.lower())
        saved = SAVED_RE.search(line)
        if saved:
            self.journal.record("checkpoint_save", float(saved.group(1)))
            return
        restored = RESTORED_RE.search(line)
        if restored:
            self.journal.record("checkpoint_restore", float(restored.group(1)))
        resumed = RESUMED_RE.search(line)
        if resumed:
            step = int(resumed.group(1))
            if self.outcome.resumed_step is None:
                self.outcome.resumed_step = step
            self.outcome.last_step = max(self.outcome.last_step or 0, step)
            self.journal.record("resumed", step)
            return
        steps = [int(match.group(1)) for match in STEP_RE.finditer(line)]
        if steps:
            self.outcome.last_step = max(self.outcome.last_step or 0, *steps)
            self.journal.record("step", max(steps))

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        with self.lock:
            if self.partial:
                self._emit(self.partial)
                self.partial = ""
        self.log.close()
        self.journal.close()
