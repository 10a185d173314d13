"""What every reference trainer shares: scikit-learn's digits, split and scaled the same way
(so the frameworks' accuracies compare), and the job dir Vertex AI implies. No trainctl import.

scikit-learn provides the data, not the code: importing it (scipy under its split and scaler)
cost each trainer process ~1.9 of its 7.7 CPU-seconds at start here, and every rank of
every restart paid it. The split and the scaling below are a few lines of numpy."""

from __future__ import annotations

import gzip
import importlib.util
import os
from pathlib import Path

import numpy as np

TEST_FRACTION = 0.2


def _digits_csv() -> Path | None:
    """The file load_digits reads (rows of 64 pixels and the label), found without importing
    scikit-learn."""
    spec = importlib.util.find_spec("sklearn")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            return path
    return None


def load(data_dir: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits; or, from a folder (the dataset staged onto the node), the samples
    of every `.npz` shard in it (arrays `x` and `y`), in the shards' name order. A relative
    folder is looked up in $TRAINCTL_DATA_DIR, where trainctl stages an experiment's data:."""
    if data_dir is None:
        csv = _digits_csv()
        if csv is None:  # a scikit-learn that keeps it elsewhere
            from sklearn.datasets import load_digits

            return load_digits(return_X_y=True)
        with gzip.open(csv, "rt") as f:
            data = np.loadtxt(f, delimiter=",")
        return data[:, :-1], data[:, -1].astype(int)
    data_dir = os.path.join(os.environ.get("TRAINCTL_DATA_DIR", "."), data_dir)
    shards = sorted(Path(data_dir).rglob("*.npz"))
    if not shards:
        raise SystemExit(f"--data-dir {data_dir}: no .npz shards there")
    parts = [np.load(shard) for shard in shards]
    return np.concatenate([p["x"] for p in parts]), np.concatenate([p["y"] for p in parts])


def _stratified_test_rows(y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Rows for the test part: ceil(20%) of all, each class's share of them by largest
    remainder, the rows of a class drawn at random."""
    classes, counts = np.unique(y, return_counts=True)
    total = int(np.ceil(TEST_FRACTION * len(y)))
    exact = counts * total / len(y)
    share = np.floor(exact).astype(int)
    share[np.argsort(share - exact, kind="stable")[:total - share.sum()]] += 1
    return np.concatenate([rng.permutation(np.flatnonzero(y == c))[:k] for c, k in zip(classes, share)])


def split(seed: int, data_dir: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): a stratified 80/20 split, in an order the seed decides,
    standardised on the train part (a constant pixel keeps its scale)."""
    x, y = load(data_dir)
    rng = np.random.default_rng(seed)
    test = _stratified_test_rows(y, rng)
    train = rng.permutation(np.setdiff1d(np.arange(len(y)), test))
    test = rng.permutation(test)
    mean, std = x[train].mean(axis=0), x[train].std(axis=0)
    std[std == 0] = 1.0
    return (((x[train] - mean) / std).astype("float32"), y[train].astype("int64"),
            ((x[test] - mean) / std).astype("float32"), y[test].astype("int64"))


def default_job_dir() -> str:
    """The parent of $AIP_MODEL_DIR, as Vertex AI sets it; ./job outside a job."""
    model_dir = os.environ.get("AIP_MODEL_DIR")
    return model_dir.rstrip("/").rsplit("/", 1)[0] if model_dir else "./job"
