"""Experiments of the trainer that costs nothing to start (tests/data/quick_trainer): for tests
of what trainctl does around a program (phases, signals, isolation), not of a framework's.
Beside conftest.py rather than in it, which is at the module size limit."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from conftest import REPO

QUICK_TRAINER = REPO / "tests" / "data" / "quick_trainer"


def quick_experiment(tmp_path: Path, args: str, nodes: int = 2, name: str = "quick", extra: str = "") -> Path:
    """An experiment file for the quick trainer: no requirements (bootstrap makes an empty uv
    environment), and each node runs it directly, no torchrun (its docstring says why the file
    declares `framework: tensorflow`). `extra` is appended YAML."""
    f = tmp_path / f"{name}.yaml"
    f.write_text(f"""
name: {name}
stack: local
overrides: {{nodes: {nodes}}}
code: {QUICK_TRAINER}
run:
  framework: tensorflow
  command: python quick_trainer.py --job-dir {{job_dir}} {args}
ttl_hours: 1
""" + extra)
    return f


def quick_model_is_whole(path: Path, megabytes: int) -> bool:
    """Whether a collected model/model.bin of the quick trainer is complete (its own digest)."""
    spec = importlib.util.spec_from_file_location("quick_trainer", QUICK_TRAINER / "quick_trainer.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return bool(module.is_whole(path.read_bytes(), megabytes))
