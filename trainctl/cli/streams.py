"""trainctl's stdout and stderr outlive their reader.

A run's output goes to a terminal, a pipe (`trainctl run ... | tee`, a CI runner, a test) or an
SSH session on a jump host; any of them can go away mid-run. Python ignores SIGPIPE, so the next
write raises BrokenPipeError (EIO on a terminal that hung up), in whichever thread wrote: a
node's line printer, or the very message that announces a stop, which then never happens while
the cluster keeps billing. Once a stream's reader is gone, what trainctl writes there goes to
/dev/null (Python's signal documentation, "Note on SIGPIPE", redirects the descriptor the same
way) and the run carries on to its end and its teardown; every node's lines are in the run's
logs. A terminal that hangs up also sends SIGHUP, which stops the run as Ctrl-C does.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
from typing import Any, TextIO

READER_GONE = (errno.EPIPE, errno.EIO)


class ReaderMayGo:
    """`stream` whose writes and flushes survive its reader going away; anything else is the
    stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.reader_gone = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            self._gone(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self._gone(exc)

    def _gone(self, exc: OSError) -> None:
        if exc.errno not in READER_GONE:
            raise exc
        with self._lock:
            if not self.reader_gone:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self._stream.fileno())
                os.close(devnull)
                self.reader_gone = True
        try:  # what the buffer still holds goes to /dev/null now, not to the next write
            self._stream.flush()
        except OSError:
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def outlive_readers() -> None:
    """From here on, the process's stdout and stderr survive their readers (idempotent)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ReaderMayGo):
            setattr(sys, name, ReaderMayGo(stream))
