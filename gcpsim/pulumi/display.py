"""What `pulumi up|destroy|refresh` prints, in the non-interactive display's shape: one line per
step as it starts and ends, then Diagnostics, Policy Violations, Outputs and a Resources summary
(pkg/backend/display). Everything goes to stdout, as the CLI writes its display there; only
the final "error: ..." line goes to stderr.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from typing import Any

from gcpsim.pulumi.properties import is_secret, plain

SYMBOLS = {"create": "+", "update": "~", "replace": "+-", "delete": "-", "same": " ",
           "read": ">", "refresh": "~", "import": "=", "discard": "-", "create-replacement": "++",
           "delete-replaced": "--"}
VERBS = {"create": ("creating", "created"), "update": ("updating", "updated"),
         "replace": ("replacing", "replaced"), "delete": ("deleting", "deleted"),
         "import": ("importing", "imported"), "refresh": ("refreshing", "refreshed"),
         "discard": ("discarding", "discarded"), "create-replacement": ("creating replacement", "created replacement"),
         "delete-replaced": ("deleting original", "deleted original")}
SUMMARY_WORDS = {"create": "created", "update": "updated", "replace": "replaced", "delete": "deleted",
                 "same": "unchanged", "import": "imported", "discard": "discarded"}


def short_type(token: str) -> str:
    """gcp:compute/instance:Instance -> gcp:compute:Instance, as the display names types."""
    parts = token.split(":")
    if len(parts) == 3:
        return f"{parts[0]}:{parts[1].split('/')[0]}:{parts[2]}"
    return token


class Display:
    def __init__(self, title: str, stream: Any = None) -> None:
        self.stream = stream or sys.stdout
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.counts: Counter[str] = Counter()
        self.diagnostics: list[tuple[str, str, str]] = []
        self.violations: list[str] = []
        self.line(title)
        self.line("")

    def line(self, text: str) -> None:
        with self.lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def step(self, op: str, token: str, name: str, done: bool = False, detail: str = "") -> None:
        if op == "same":
            if done:
                self.counts["same"] += 1
            return
        words = VERBS.get(op, (op, op))
        suffix = f" [{detail}]" if detail else ""
        elapsed = f" ({time.monotonic() - self.started:.0f}s)"
        self.line(f" {SYMBOLS.get(op, ' '):<3}{short_type(token)} {name} {words[done]}{elapsed}{suffix}")
        if done:
            self.counts[op] += 1

    def failed(self, op: str, token: str, name: str, message: str) -> None:
        words = VERBS.get(op, (op, op))
        self.line(f" {SYMBOLS.get(op, ' '):<3}{short_type(token)} {name} {words[0]} failed error: "
                  f"{message.splitlines()[0] if message else ''}")
        self.counts["errored"] += 1
        self.diagnostic(token, name, message)

    def diagnostic(self, token: str, name: str, message: str, severity: str = "error") -> None:
        with self.lock:
            self.diagnostics.append((f"{short_type(token)} ({name})", severity, message))

    def violation(self, text: str) -> None:
        with self.lock:
            self.violations.append(text)

    def finish(self, outputs: dict[str, Any] | None, show_counts: bool = True) -> None:
        if self.diagnostics:
            self.line("Diagnostics:")
            for where, severity, message in self.diagnostics:
                self.line(f"  {where}:")
                for i, text in enumerate(message.splitlines() or [""]):
                    self.line(f"    {severity + ': ' if i == 0 else ''}{text}")
                self.line("")
        if self.violations:
            self.line("Policy Violations:")
            for text in self.violations:
                self.line(text)
            self.line("")
        if outputs:
            self.line("Outputs:")
            for key in sorted(outputs):
                value = "[secret]" if is_secret(outputs[key]) else json.dumps(plain(outputs[key]))
                self.line(f"    {key}: {value}")
            self.line("")
        if show_counts:
            self.line("Resources:")
            for op, word in SUMMARY_WORDS.items():
                if self.counts[op]:
                    self.line(f"    {SYMBOLS[op] if op != 'same' else ''} {self.counts[op]} {word}".rstrip())
            if self.counts["errored"]:
                self.line(f"    {self.counts['errored']} errored")
            self.line("")
        self.line(f"Duration: {time.monotonic() - self.started:.0f}s")
