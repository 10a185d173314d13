"""Per-stack state for the local realizer: intent is recorded before anything is created.

`down` walks the records backwards and removes each one, whether or not its creation finished,
so a `kill -9` at any point leaves nothing that `down` cannot find.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.spec.stack_config import ConfigError
from infra.providers.stack_home import record_provider, state_dir


@dataclass
class StackState:
    """The state file of one stack: its spec, its resources in creation order, its status."""

    path: Path
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def resources(self) -> list[dict[str, Any]]:
        return self.data.setdefault("resources", [])

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump(self.data, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def intend(self, kind: str, **attrs: Any) -> dict[str, Any]:
        record = {"kind": kind, "status": "intent", **attrs}
        self.resources.append(record)
        self.save()
        return record

    def created(self, record: dict[str, Any]) -> None:
        record["status"] = "created"
        self.save()


def load_state(stack: str) -> StackState | None:
    """The stack's state, or None if it has none. A corrupt file raises with a way out."""
    path = state_dir(stack) / "state.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("resources", []), list):
            raise ValueError("not a state object")
    except (ValueError, OSError) as exc:
        raise ConfigError(
            f"state file {path} is unreadable ({exc}); `trainctl down --stack {stack} --force` "
            "removes whatever of the stack still exists, found by its names") from None
    return StackState(path, data)


def new_state(stack: str, spec: dict[str, Any]) -> StackState:
    record_provider(stack, "local")
    directory = state_dir(stack)
    state = StackState(directory / "state.json",
                       {"stack": stack, "created_at": time.time(), "spec": spec,
                        "status": "creating", "resources": []})
    state.save()
    return state


