"""Atomic checkpoints in a job dir: a checkpoint is complete before LATEST names it.

Resume reads LATEST; if that object is missing or unreadable (a crash mid-upload, a full disk),
it falls back to the newest checkpoint that loads, so a partial one is never used.

A checkpoint is one object holding a dict; its codec turns that into bytes: TORCH (`torch.save`,
the PyTorch trainers) or NPZ (numpy arrays and lists of them, the rest as JSON: the TensorFlow
trainer, which has no torch). Each framework is imported only by its own codec.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Callable

from trainers import storage

LATEST = "LATEST"


@dataclass(frozen=True)
class Codec:
    suffix: str
    encode: Callable[[dict], bytes]
    decode: Callable[[bytes], dict]


def _torch_encode(state: dict) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def _torch_decode(data: bytes) -> dict:
    import torch

    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)


META = "__meta__"  # the npz entry with everything that is not an array, as JSON


def _npz_encode(state: dict) -> bytes:
    import numpy as np

    def numeric(v: Any) -> bool:  # an array, or a numpy scalar (a variable's .numpy() of rank 0)
        return isinstance(v, (np.ndarray, np.generic))

    arrays: dict[str, Any] = {}
    meta: dict[str, Any] = {"lists": {}, "values": {}}
    for key, value in state.items():
        if numeric(value):
            arrays[key] = np.asarray(value)
        elif isinstance(value, list) and value and all(numeric(v) for v in value):
            meta["lists"][key] = len(value)
            arrays.update({f"{key}.{i}": np.asarray(v) for i, v in enumerate(value)})
        else:
            meta["values"][key] = value
    buf = io.BytesIO()
    np.savez(buf, **{META: np.array(json.dumps(meta))}, **arrays)
    return buf.getvalue()


def _npz_decode(data: bytes) -> dict:
    import numpy as np

    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        meta = json.loads(str(npz[META]))
        lists = {key: [npz[f"{key}.{i}"] for i in range(n)] for key, n in meta["lists"].items()}
        listed = {f"{key}.{i}" for key, n in meta["lists"].items() for i in range(n)}
        arrays = {key: npz[key] for key in npz.files if key != META and key not in listed}
    return {**meta["values"], **arrays, **lists}


TORCH = Codec(".pt", _torch_encode, _torch_decode)
NPZ = Codec(".npz", _npz_encode, _npz_decode)


def saved_line(seconds: float) -> str:
    """What a trainer prints once a checkpoint is written, on the channel its steps use: the
    ledger cuts these seconds out of training as unproductive checkpoint save time."""
    return f"checkpoint saved in {seconds:.3f} s"


def restored_line(seconds: float) -> str:
    """The same for reading the checkpoint a resumed program starts from (restore time)."""
    return f"checkpoint restored in {seconds:.3f} s"


def save(ckpt_dir: str, step: int, state: dict, codec: Codec = TORCH) -> str:
    name = f"ckpt-{step:09d}{codec.suffix}"
    storage.write_bytes(storage.join(ckpt_dir, name), codec.encode(state))
    storage.write_bytes(storage.join(ckpt_dir, LATEST), json.dumps({"name": name, "step": step}).encode())
    return name


def _load(ckpt_dir: str, name: str, codec: Codec) -> dict | None:
    try:
        return codec.decode(storage.read_bytes(storage.join(ckpt_dir, name)))
    except Exception:
        return None


def load_latest(ckpt_dir: str, codec: Codec = TORCH) -> dict | None:
    try:
        latest = json.loads(storage.read_bytes(storage.join(ckpt_dir, LATEST)))
        state = _load(ckpt_dir, latest["name"], codec)
        if state is not None:
            return state
    except Exception:
        pass
    for name in reversed([n for n in storage.listdir(ckpt_dir)
                          if n.startswith("ckpt-") and n.endswith(codec.suffix)]):
        state = _load(ckpt_dir, name, codec)
        if state is not None:
            return state
    return None
