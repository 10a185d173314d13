"""What every reference trainer shares: scikit-learn's digits, split and scaled the same way
(so the frameworks' accuracies compare), and the job dir Vertex AI implies. No trainctl import."""

from __future__ import annotations

import os

import numpy as np


def split(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): a stratified 80/20 split, standardised on the train part."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    scaler = StandardScaler().fit(x_train)
    return (scaler.transform(x_train).astype("float32"), y_train.astype("int64"),
            scaler.transform(x_test).astype("float32"), y_test.astype("int64"))


def default_job_dir() -> str:
    """The parent of $AIP_MODEL_DIR, as Vertex AI sets it; ./job outside a job."""
    model_dir = os.environ.get("AIP_MODEL_DIR")
    return model_dir.rstrip("/").rsplit("/", 1)[0] if model_dir else "./job"
