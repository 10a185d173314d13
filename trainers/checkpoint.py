"""Atomic checkpoints in a job dir: a checkpoint is complete before LATEST names it.

Resume reads LATEST; if that object is missing or unreadable (a crash mid-upload, a full disk),
it falls back to the newest checkpoint that loads, so a partial one is never used.
"""

from __future__ import annotations

import io
import json

import torch

from trainers import storage

LATEST = "LATEST"


def save(ckpt_dir: str, step: int, state: dict) -> str:
    buf = io.BytesIO()
    torch.save(state, buf)
    name = f"ckpt-{step:09d}.pt"
    storage.write_bytes(storage.join(ckpt_dir, name), buf.getvalue())
    storage.write_bytes(storage.join(ckpt_dir, LATEST), json.dumps({"name": name, "step": step}).encode())
    return name


def _load(ckpt_dir: str, name: str) -> dict | None:
    try:
        return torch.load(io.BytesIO(storage.read_bytes(storage.join(ckpt_dir, name))),
                          map_location="cpu", weights_only=False)
    except Exception:
        return None


def load_latest(ckpt_dir: str) -> dict | None:
    try:
        latest = json.loads(storage.read_bytes(storage.join(ckpt_dir, LATEST)))
        state = _load(ckpt_dir, latest["name"])
        if state is not None:
            return state
    except Exception:
        pass
    for name in reversed([n for n in storage.listdir(ckpt_dir) if n.startswith("ckpt-") and n.endswith(".pt")]):
        state = _load(ckpt_dir, name)
        if state is not None:
            return state
    return None
