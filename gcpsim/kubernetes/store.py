"""The API server's storage: objects by (resource, namespace, name), every change under a new
resourceVersion kept in a history that watches replay, the containers' output for the log
endpoint, and every request, for those who want to see what a client asked.

One condition variable guards it all; whoever changes something notifies it, and watches and
followed logs wait on it.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Iterator

from gcpsim.kubernetes.objects import Obj, not_found, selector_matches

WATCH_SECONDS = 30  # a watch without timeoutSeconds ends after this, as the server's does


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int = 0
    routed: bool = True


class ApiStore:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.rv = 0
        self.objects: dict[tuple[str, str, str], Obj] = {}  # (resource, namespace, name)
        self.history: list[tuple[int, str, str, Obj]] = []  # (rv, resource, event type, object)
        self.logs: dict[str, list[str]] = {}  # pod uid -> lines written so far
        self.requests: list[Request] = []
        self.closing = False

    # -- what a client asked (tests read these) ----------------------------------------------

    def refused(self) -> list[Request]:
        """Requests refused as malformed or not known: a client the server would not serve."""
        return [r for r in self.requests if not r.routed or r.status in (400, 401, 405, 422)]

    def calls(self, method: str, pattern: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and re.fullmatch(pattern, r.path)]

    def names(self, resource: str) -> list[str]:
        with self.cond:
            return sorted(name for (res, _, name) in self.objects if res == resource)

    # -- objects -------------------------------------------------------------------------------

    def get(self, resource: str, ns: str, name: str) -> Obj:
        obj = self.objects.get((resource, ns, name))
        if obj is None:
            raise not_found(resource, name)
        return obj

    def select(self, resource: str, ns: str, query: dict[str, str]) -> list[Obj]:
        return [o for (res, o_ns, _), o in self.objects.items()
                if res == resource and o_ns == ns and self.matches(o, query)]

    @staticmethod
    def matches(obj: Obj, query: dict[str, str]) -> bool:
        fields = {"metadata.name": obj["metadata"]["name"], "metadata.namespace": obj["metadata"]["namespace"]}
        return (selector_matches(query.get("labelSelector", ""), obj["metadata"].get("labels") or {})
                and selector_matches(query.get("fieldSelector", ""), fields))

    def record(self, resource: str, event: str, obj: Obj) -> None:
        """Store a change under a new resourceVersion and wake watchers (hold self.cond)."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = (resource, obj["metadata"]["namespace"], obj["metadata"]["name"])
        if event == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        self.history.append((self.rv, resource, event, copy.deepcopy(obj)))
        self.cond.notify_all()

    # -- watches and logs ---------------------------------------------------------------------

    def watch(self, resource: str, ns: str, query: dict[str, str]) -> Iterator[bytes]:
        def event(kind: str, obj: Obj) -> bytes:
            return json.dumps({"type": kind, "object": obj}).encode() + b"\n"

        with self.cond:
            since = query.get("resourceVersion", "")
            if since in ("", "0"):  # start from the current state, as synthetic ADDED events
                backlog = [event("ADDED", copy.deepcopy(o)) for o in self.select(resource, ns, query)]
                position = len(self.history)
            else:
                backlog = []
                position = next((i for i, h in enumerate(self.history) if h[0] > int(since)),
                                len(self.history))
        yield from backlog
        deadline = threading.Event()
        timer = threading.Timer(float(query.get("timeoutSeconds") or WATCH_SECONDS), self._wake, (deadline,))
        timer.daemon = True
        timer.start()
        try:
            while True:
                with self.cond:
                    self.cond.wait_for(lambda: len(self.history) > position or self.closing or deadline.is_set())
                    if self.closing or (deadline.is_set() and len(self.history) <= position):
                        return
                    new, position = self.history[position:], len(self.history)
                for _, res, kind, obj in new:
                    if res == resource and obj["metadata"]["namespace"] == ns and self.matches(obj, query):
                        yield event(kind, obj)
        finally:
            timer.cancel()

    def _wake(self, flag: threading.Event) -> None:
        flag.set()
        with self.cond:
            self.cond.notify_all()

    def log_lines(self, ns: str, name: str, uid: str, follow: bool) -> Iterator[bytes]:
        """The container's output so far; with follow, also what comes, until it ends."""
        sent = 0
        while True:
            with self.cond:
                if follow:
                    self.cond.wait_for(lambda: len(self.logs[uid]) > sent or self.closing
                                       or not self.running(ns, name, uid))
                lines, sent = self.logs[uid][sent:], len(self.logs[uid])
                ended = not follow or self.closing or not self.running(ns, name, uid)
            if lines:
                yield "".join(line + "\n" for line in lines).encode()
            if ended and not lines:
                return

    def running(self, ns: str, name: str, uid: str) -> bool:
        pod = self.objects.get(("pods", ns, name))
        return (pod is not None and pod["metadata"]["uid"] == uid
                and "terminated" not in pod["status"]["containerStatuses"][0]["state"])
