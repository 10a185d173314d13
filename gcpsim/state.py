"""The simulated cloud's state: one JSON document on disk, changed under a file lock.

Every process that serves the simulator's API (trainctl, the Pulumi stand-in it starts, a
second trainctl in another terminal) reads and writes the same document, so the cloud is one
whatever asks it, and it outlives the processes, as a project outlives a laptop session.

Time passes lazily: nothing runs in the background. Before a request is answered, the world is
advanced to the present (operations finish, instances reach RUNNING, queued resources are
granted, preemptions land) by the tickers the API modules register, each acting on what is due.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

SCHEMA_VERSION = 1


class World:
    """The document, with accessors that say what lives where.

    projects[<id>] = {"number", "services": {name: state}, "quotas": {region|"global": {metric:
    limit}}, "zones": {...}, "collections": {<collection>: {<key>: resource}}, "caller": {...}}
    names[<namespace>][<name>] = project id: names that are global (buckets) and stay taken.
    operations[<name>] = {"api", "project", "done_at", "doc", "on_done": ...}
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        # the machine backend of the simulator serving this request (set by the Store; not saved)
        self.backend: Any = None
        self.data.setdefault("version", SCHEMA_VERSION)
        self.data.setdefault("projects", {})
        self.data.setdefault("names", {})
        self.data.setdefault("operations", {})
        self.data.setdefault("seq", 0)
        self.dirty = False

    def next_id(self) -> int:
        self.data["seq"] += 1
        return self.data["seq"]

    def project(self, project: str) -> dict[str, Any] | None:
        """By id or by number, as Google's APIs accept either."""
        projects = self.data["projects"]
        if project in projects:
            return projects[project]
        return next((p for p in projects.values() if str(p["number"]) == project), None)

    def collection(self, project: str, name: str) -> dict[str, Any]:
        p = self.project(project)
        assert p is not None, project
        return p.setdefault("collections", {}).setdefault(name, {})

    def names(self, namespace: str) -> dict[str, str]:
        return self.data["names"].setdefault(namespace, {})

    def operations(self) -> dict[str, Any]:
        return self.data["operations"]


Ticker = Callable[[World, float], None]
TICKERS: list[Ticker] = []


def ticker(fn: Ticker) -> Ticker:
    """Registers what an API module does as time passes (called under the lock, each request)."""
    TICKERS.append(fn)
    return fn


class Store:
    """The document at `path`, cached in memory while no other process has written it."""

    def __init__(self, home: Path) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = home / "world.json"
        self.lock_path = home / "world.lock"
        self._cached: tuple[tuple[int, int], dict[str, Any]] | None = None
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._world: World | None = None
        self.backend: Any = None  # set by the Simulator; handed to every world it loads

    def _signature(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _load(self) -> World:
        sig = self._signature()
        if sig is None:
            return World({})
        if self._cached and self._cached[0] == sig:
            return World(json.loads(json.dumps(self._cached[1])))
        data = json.loads(self.path.read_text())
        self._cached = (sig, data)
        return World(json.loads(json.dumps(data)))

    def _save(self, world: World) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(world.data, sort_keys=True))
        os.replace(tmp, self.path)
        sig = self._signature()
        if sig is not None:
            self._cached = (sig, json.loads(json.dumps(world.data)))

    @contextlib.contextmanager
    def transaction(self, now: float | None = None) -> Iterator[World]:
        """The world, advanced to now, exclusively; saved at the end if anything changed.
        Re-entrant within a thread (a handler may call helpers that open one too)."""
        with self._thread_lock:
            if self._depth:
                self._depth += 1
                try:
                    assert self._world is not None
                    yield self._world
                finally:
                    self._depth -= 1
                return
            with open(self.lock_path, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    world = self._load()
                    world.backend = self.backend
                    before = json.dumps(world.data, sort_keys=True)
                    at = time.time() if now is None else now
                    for tick in TICKERS:
                        tick(world, at)
                    self._world, self._depth = world, 1
                    try:
                        yield world
                    finally:
                        self._world, self._depth = None, 0
                    if json.dumps(world.data, sort_keys=True) != before:
                        self._save(world)
                finally:
                    fcntl.flock(lock, fcntl.LOCK_UN)
