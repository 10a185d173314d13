"""What every reference trainer shares: scikit-learn's digits, split and scaled the same way
(so the frameworks' accuracies compare), and the job dir Vertex AI implies. No trainctl import."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


def load(data_dir: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits; or, from a folder (the dataset staged onto the node), the samples
    of every `.npz` shard in it (arrays `x` and `y`), in the shards' name order. A relative
    folder is looked up in $TRAINCTL_DATA_DIR, where trainctl stages an experiment's data:."""
    if data_dir is None:
        from sklearn.datasets import load_digits

        return load_digits(return_X_y=True)
    data_dir = os.path.join(os.environ.get("TRAINCTL_DATA_DIR", "."), data_dir)
    shards = sorted(Path(data_dir).rglob("*.npz"))
    if not shards:
        raise SystemExit(f"--data-dir {data_dir}: no .npz shards there")
    parts = [np.load(shard) for shard in shards]
    return np.concatenate([p["x"] for p in parts]), np.concatenate([p["y"] for p in parts])


def split(seed: int, data_dir: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): a stratified 80/20 split, standardised on the train part."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    x, y = load(data_dir)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    scaler = StandardScaler().fit(x_train)
    return (scaler.transform(x_train).astype("float32"), y_train.astype("int64"),
            scaler.transform(x_test).astype("float32"), y_test.astype("int64"))


def default_job_dir() -> str:
    """The parent of $AIP_MODEL_DIR, as Vertex AI sets it; ./job outside a job."""
    model_dir = os.environ.get("AIP_MODEL_DIR")
    return model_dir.rstrip("/").rsplit("/", 1)[0] if model_dir else "./job"
