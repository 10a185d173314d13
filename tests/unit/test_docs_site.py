"""The docs site (mkdocs.yml, docs/) builds with `mkdocs build --strict`: no broken link or
anchor, no page left out of the nav; its reference, generated from the code by
docs/gen_reference.py, describes every field and names every `trainctl:` key the shipped stack
files use."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from conftest import REPO

def gen_reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "docs" / "gen_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_strict(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("reference/stack-file", "reference/experiment", "reference/cli", "reference/exit-codes"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page


@pytest.mark.parametrize("rows", ["stack_rows", "experiment_rows"])
def test_every_reference_field_has_a_description(rows: str) -> None:
    fields = getattr(gen_reference(), rows)()
    assert fields
    assert [r.key for r in fields if not r.description.strip()] == []


def test_every_cli_option_has_help() -> None:
    module = gen_reference()
    missing = [f"{name} {p.name}" for name, cmd in module.cli_commands() for p in cmd.params
               if p.name != "help" and not (getattr(p, "help", None) or "").strip()]
    assert missing == []


def stack_file_keys(value: Any, prefix: str) -> set[str]:
    """The keys a stack file's value uses, nested ones dotted (`ssh.source_ranges`, `pools[].role`)."""
    if isinstance(value, dict):
        return {k for key, v in value.items() for k in {prefix + str(key)} | stack_file_keys(v, f"{prefix}{key}.")}
    if isinstance(value, list):
        return {k for item in value for k in stack_file_keys(item, prefix[:-1] + "[].")}
    return set()


def test_every_key_of_the_shipped_stack_files_is_in_the_reference() -> None:
    used: set[str] = set()
    for path in sorted((REPO / "stacks").glob("Pulumi.*.yaml")):
        for key, value in (yaml.safe_load(path.read_text()).get("config") or {}).items():
            namespace, _, field = str(key).partition(":")
            if namespace == "trainctl":
                used |= {field} | stack_file_keys(value, field + ".")
    assert {"kind", "provider", "ssh.source_ranges", "gpu.type"} <= used  # the files were read
    module = gen_reference()
    documented = {r.key for r in module.stack_rows()}
    assert sorted(used - documented) == []
    page = module.stack_page()
    top = {k for k in used if "." not in k}
    assert sorted(k for k in top if f"`trainctl:{k}`" not in page) == []


def test_the_exit_codes_page_covers_the_hierarchy() -> None:
    page = gen_reference().exit_codes_page()
    for name, code in (("ConfigError", 2), ("ProvisionError", 3), ("RemoteError", 1), ("BudgetReached", 4),
                       ("CapacityUnavailable", 3), ("BootstrapFailed", 1)):
        assert re.search(rf"`{name}` \| `[a-z_.]+` \| {code} \|", page), name
