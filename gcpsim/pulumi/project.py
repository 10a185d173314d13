"""The Pulumi project in the work directory: Pulumi.yaml (name, runtime, main, stackConfigDir)
and each stack's Pulumi.<stack>.yaml, whose `config:` becomes the program's PULUMI_CONFIG as the
CLI passes it (namespaced keys, structured values as JSON text)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class ProjectError(Exception):
    """A problem with the project's files (exit 255, the CLI's message)."""


@dataclass(frozen=True)
class Project:
    root: Path
    name: str
    runtime: str
    main: Path
    config_dir: Path

    def stack_file(self, stack: str) -> Path:
        return self.config_dir / f"Pulumi.{stack}.yaml"

    def config(self, stack: str) -> dict[str, str]:
        """The stack's configuration as PULUMI_CONFIG carries it to the program."""
        path = self.stack_file(stack)
        if not path.is_file():
            return {}
        doc = yaml.safe_load(path.read_text()) or {}
        out: dict[str, str] = {}
        for key, value in (doc.get("config") or {}).items():
            if isinstance(value, dict) and "secure" in value:
                raise ProjectError(f"config {key!r} of stack {stack!r} is a secret: the simulator's "
                                   "pulumi does not decrypt stack secrets; set it in plain text")
            full = key if ":" in key else f"{self.name}:{key}"
            out[full] = value if isinstance(value, str) else json.dumps(value)
        return out


def load(work_dir: Path) -> Project:
    for name in ("Pulumi.yaml", "Pulumi.yml"):
        path = work_dir / name
        if path.is_file():
            break
    else:
        raise ProjectError(f"no Pulumi.yaml project file found (searching upwards from {work_dir}). "
                           "If you have not created a project yet, use `pulumi new` to do so")
    doc: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
    runtime = doc.get("runtime")
    runtime_name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if runtime_name != "python":
        raise ProjectError(f"the simulator's pulumi runs Python programs only (Pulumi.yaml runtime: {runtime_name!r})")
    return Project(root=work_dir, name=str(doc["name"]), runtime=runtime_name,
                   main=(work_dir / str(doc.get("main") or ".")).resolve(),
                   config_dir=(work_dir / str(doc.get("stackConfigDir") or ".")).resolve())
