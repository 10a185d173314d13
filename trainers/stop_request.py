"""SIGTERM as a request to stop at the next step boundary, with a checkpoint, not as death.

A spot VM being reclaimed (and `trainctl`'s stop) sends SIGTERM, then kills what is left ~30 s
later. Python's default is to die on the spot, losing everything since the last checkpoint.
With the handler installed, the signal only raises a flag: a checkpoint being written finishes,
and the training loop saves its exact position and leaves with 128 + SIGTERM.

A process blocked in a collective (its peer is gone, or being restarted by torchrun) never
reaches a step boundary, and Python runs no handler while C++ blocks. So the signal is also
taken from a wakeup fd by a thread: unless the loop acknowledges the request within
ACK_SECONDS (it is saving its position), or is inside a `busy()` block (a checkpoint write),
the process leaves at once, as it would have by default. A trainer whose collectives fail by
themselves when a peer is gone (TensorFlow's, through its coordination service's heartbeats)
installs the watch without that deadline: its stop takes a step all workers share, which a slow
peer delays but only a dead one ends, and the collective's error says which. No trainctl import.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from typing import Iterator, NoReturn

EXIT_CODE = 128 + signal.SIGTERM
ACK_SECONDS = 2.0


class StopRequest:
    def __init__(self, ack_seconds: float | None = ACK_SECONDS) -> None:
        self._flag = threading.Event()
        self._acknowledged = threading.Event()
        self._busy = 0
        self._ack_seconds = ack_seconds

    @classmethod
    def install(cls, ack_seconds: float | None = ACK_SECONDS) -> "StopRequest":
        """`ack_seconds=None`: the watch never leaves on its own (see the module's doc)."""
        request = cls(ack_seconds)
        signal.signal(signal.SIGTERM, lambda _signum, _frame: request._flag.set())
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        request._wakeup = (reader, writer)  # kept open for the process's life
        threading.Thread(target=request._watch, args=(reader,), daemon=True).start()
        return request

    def _watch(self, reader: socket.socket) -> None:
        while True:
            data = reader.recv(64)
            if not data:
                return
            if signal.SIGTERM in data:
                self._flag.set()
                if self._ack_seconds is not None:
                    self._leave_unless_acknowledged(self._ack_seconds)
                return

    def _leave_unless_acknowledged(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._acknowledged.wait(0.05):
            if self._busy:
                deadline = time.monotonic() + seconds
            elif time.monotonic() > deadline:
                # stuck where no step ends: leave as the default would, saying so (this exit
                # runs no handler and prints no traceback)
                os.write(2, f"SIGTERM not acknowledged at a step boundary within {seconds} s; "
                            f"leaving with {EXIT_CODE}\n".encode())
                os._exit(EXIT_CODE)

    @property
    def requested(self) -> bool:
        return self._flag.is_set()

    def pause(self, seconds: float) -> None:
        """A sleep that a stop request ends: the loop then stops at its next step boundary."""
        self._flag.wait(seconds)

    def acknowledge(self) -> None:
        """The loop is saving its position: the watch lets it finish."""
        self._acknowledged.set()

    @staticmethod
    def leave(code: int = EXIT_CODE) -> NoReturn:
        """Exit now that the position is saved, without the interpreter's teardown: unloading
        torch takes ~0.3 s, and more with a process group whose peer is gone (measured on the
        survivors of a preemption: their nodes' runs ended 1.9-2.6 s after the checkpoint line,
        0.5 s with this exit). The VM's shutdown, or the job's restart, waits for that exit and
        gains nothing from it."""
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Work a stop request must not cut short (a checkpoint being written)."""
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1
