"""The CLI's stack, config and account commands, with the output formats the Automation API
parses (pulumi/automation/_local_workspace.py and _stack.py): `stack output --json` with
"[secret]" for secrets unless --show-secrets, `stack history --json` newest first with
RFC 5424 millisecond times, `stack ls --json`, `whoami --json`."""

from __future__ import annotations

import getpass
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from gcpsim.pulumi.backend import Backend, BackendError, format_time
from gcpsim.pulumi.engine import STACK_TYPE
from gcpsim.pulumi.project import Project
from gcpsim.pulumi.properties import is_secret, plain

SECRET = "[secret]"


def _workspace_file(project: Project) -> Path:
    home = Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi")
    digest = hashlib.sha1(str(project.root / "Pulumi.yaml").encode()).hexdigest()
    return home / "workspaces" / f"{project.name}-{digest}-workspace.json"


def current_stack(project: Project) -> str | None:
    try:
        return json.loads(_workspace_file(project).read_text()).get("stack") or None
    except (OSError, ValueError):
        return None


def select(project: Project, stack: str | None) -> None:
    path = _workspace_file(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"stack": stack or ""}))


def require_stack(project: Project, stack: str | None) -> str:
    chosen = stack or current_stack(project)
    if not chosen:
        raise BackendError("no stack selected; please use `pulumi stack select` to choose one")
    return chosen


def whoami(backend_url: str, as_json: bool) -> None:
    user = getpass.getuser()
    print(json.dumps({"user": user, "organizations": [], "url": backend_url}) if as_json else user)


def stack_outputs(backend: Backend, stack: str) -> dict[str, Any]:
    root = next((r for r in backend.resources(stack) if r["type"] == STACK_TYPE), None)
    return root["outputs"] if root else {}


def print_outputs(backend: Backend, stack: str, show_secrets: bool, name: str | None) -> None:
    outputs = {k: plain(v) if show_secrets or not is_secret(v) else SECRET
               for k, v in stack_outputs(backend, stack).items()}
    if name is not None:
        if name not in outputs:
            raise BackendError(f"current stack does not have output property '{name}'")
        print(json.dumps(outputs[name], indent=2))
        return
    print(json.dumps(outputs, indent=2))


def print_history(backend: Backend, stack: str, page_size: int, page: int) -> None:
    updates = backend.history(stack)
    if page_size:
        updates = updates[(max(page, 1) - 1) * page_size: max(page, 1) * page_size]
    print(json.dumps([{**u, "startTime": format_time(u["startTime"]), "endTime": format_time(u["endTime"])}
                      for u in updates], indent=2))


def print_stacks(project: Project, backend: Backend) -> None:
    current = current_stack(project)
    rows = []
    for name in backend.stacks():
        row: dict[str, Any] = {"name": name, "current": name == current, "updateInProgress": False,
                               "url": f"{backend.url}/{backend.project}/{name}"}
        history = backend.history(name)
        if history:
            row["lastUpdate"] = format_time(history[0]["endTime"])
            row["resourceCount"] = len(backend.resources(name))
        rows.append(row)
    print(json.dumps(rows, indent=2))


def export(backend: Backend, stack: str, show_secrets: bool) -> None:
    resources = backend.resources(stack)
    if not show_secrets:
        resources = json.loads(json.dumps(resources), object_hook=lambda d: (
            {"4dabf18193072939515e22adb298388d": d["4dabf18193072939515e22adb298388d"],
             "ciphertext": "[secret]"} if is_secret(d) else d))
    print(json.dumps({"version": 3, "deployment": {"resources": resources}}, indent=4))


def print_config(project: Project, stack: str, key: str | None) -> None:
    config = project.config(stack)
    if key is not None:
        full = key if ":" in key else f"{project.name}:{key}"
        if full not in config:
            raise BackendError(f"configuration key '{key}' not found for stack '{stack}'")
        print(json.dumps(config[full]))
        return
    print(json.dumps({k: {"value": v, "secret": False} for k, v in config.items()}, indent=2))


def remove_config_file(project: Project, stack: str) -> None:
    """`stack rm` without --preserve-config deletes Pulumi.<stack>.yaml, as the CLI does."""
    try:
        project.stack_file(stack).unlink()
    except FileNotFoundError:
        pass
