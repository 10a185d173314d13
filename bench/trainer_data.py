"""What a reference trainer's process spends on its data before it trains: the digits split and
scaled with scikit-learn (baseline: train_test_split, StandardScaler, load_digits, as the
trainers did) against trainers/digits_data.py's numpy (today), in this one script.

    .venv/bin/python bench/trainer_data.py [--rounds 5]   (needs the trainers' environment)

Each round runs both in fresh processes of the trainers' interpreter, alternating; CPU-s is
user+system of the reaped child (getrusage), imports included: every rank of every restart pays
them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from conftest import REPO, seeded_python  # noqa: E402
from cpu_wall import compare  # noqa: E402  (bench/, this script's folder)

BASELINE = """
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
x, y = load_digits(return_X_y=True)
x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
scaler = StandardScaler().fit(x_train)
parts = scaler.transform(x_train), y_train, scaler.transform(x_test), y_test
assert len(parts[0]) == 1437
"""
TODAY = """
from trainers.digits_data import split
parts = split(0)
assert len(parts[0]) == 1437
"""


def one(python: Path, source: str) -> tuple[float, float]:
    started = time.monotonic()
    proc = subprocess.Popen([str(python), "-c", "import numpy\n" + source], cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return usage.ru_utime + usage.ru_stime, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    python = seeded_python(REPO / "trainers" / "requirements.txt")
    compare(args.rounds, ("baseline", lambda: one(python, BASELINE)), ("numpy", lambda: one(python, TODAY)))


if __name__ == "__main__":
    main()
