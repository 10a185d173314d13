"""SIGTERM as a request to stop at the next step boundary, with a checkpoint, not as death.

A spot VM being reclaimed (and `trainctl`'s stop) sends SIGTERM, then kills what is left ~30 s
later. Python's default is to die on the spot, losing everything since the last checkpoint.
With the handler installed, the signal only raises a flag: a checkpoint being written finishes,
and the training loop saves its exact position and leaves with 128 + SIGTERM. No trainctl import.
"""

from __future__ import annotations

import signal
import threading

EXIT_CODE = 128 + signal.SIGTERM


class StopRequest:
    def __init__(self) -> None:
        self._flag = threading.Event()

    @classmethod
    def install(cls) -> "StopRequest":
        request = cls()
        signal.signal(signal.SIGTERM, lambda _signum, _frame: request._flag.set())
        return request

    @property
    def requested(self) -> bool:
        return self._flag.is_set()
