"""What the machine backend made on this machine, recorded before it is made.

One JSON file per simulator home (<home>/machines/machines.json), apart from the world
document: the world says what the API shows, the ledger what exists in the kernel (networks'
namespaces and links, machines' namespaces, disks and processes). Each record is written with
status "intent" before anything of it is created, so removal after a crash finds everything.
Changed under a file lock (several processes may serve the API) that a thread may take again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator


class Ledger:
    def __init__(self, home: Path) -> None:
        self.dir = home / "machines"
        self.path = self.dir / "machines.json"
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._data: dict[str, Any] = {}
        self._file: Any = None

    @contextlib.contextmanager
    def edit(self) -> Iterator[dict[str, Any]]:
        """The records, locked for this thread; saved when the outermost edit ends."""
        with self._thread_lock:
            if self._depth == 0:
                self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
                self._file = open(self.dir / "lock", "a")
                fcntl.flock(self._file, fcntl.LOCK_EX)
                self._data = self._load()
            self._depth += 1
            try:
                yield self._data
            finally:
                self._depth -= 1
                if self._depth == 0:
                    try:
                        self.save()
                    finally:
                        self._file.close()
                        self._file = None

    def save(self) -> None:
        """Write the records now (inside an edit): an intent must be on disk before its act."""
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump(self._data, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            data = {}
        data.setdefault("networks", {})
        data.setdefault("machines", {})
        return data
