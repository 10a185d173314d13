"""The reference trainers' split and scaling: what scikit-learn's stratified split and standard
scaler gave them, without importing scikit-learn in every rank (trainers/digits_data.py)."""

from __future__ import annotations

import numpy as np
import pytest

from trainers.digits_data import split


@pytest.fixture
def shards(tmp_path, monkeypatch):
    """Two .npz shards as `data:` stages them: 3 classes of 50, 30 and 17 rows, 4 features, the
    last one constant."""
    rng = np.random.default_rng(7)
    y = np.repeat([0, 1, 2], [50, 30, 17])
    x = np.column_stack([rng.normal(y * 3.0, 1.0, size=(3, len(y))).T, np.full(len(y), 5.0)])
    order = rng.permutation(len(y))
    x, y = x[order], y[order]
    (tmp_path / "digits").mkdir()
    np.savez(tmp_path / "digits" / "a.npz", x=x[:40], y=y[:40])
    np.savez(tmp_path / "digits" / "b.npz", x=x[40:], y=y[40:])
    monkeypatch.setenv("TRAINCTL_DATA_DIR", str(tmp_path))
    return x, y


def test_a_fifth_of_every_class_is_held_out_and_no_row_is_lost_or_shared(shards):
    x, y = shards
    x_train, y_train, x_test, y_test = split(0, "digits")
    assert (len(y_train), len(y_test)) == (77, 20)  # ceil(0.2 * 97) held out
    assert np.bincount(y_test).tolist() == [10, 6, 4]  # 10.3, 6.2, 3.5: the largest remainder rounds up
    assert np.bincount(y_train).tolist() == [40, 24, 13]
    assert (x_train.dtype, y_train.dtype) == (np.float32, np.int64)


def test_the_seed_decides_the_split_and_the_same_seed_gives_the_same_one(shards):
    first, again, other = split(0, "digits"), split(0, "digits"), split(1, "digits")
    for a, b in zip(first, again):
        assert np.array_equal(a, b)
    assert not np.array_equal(first[2], other[2])


def test_features_are_standardised_on_the_train_part_and_a_constant_one_keeps_its_scale(shards):
    x_train, _, x_test, _ = split(0, "digits")
    assert np.allclose(x_train.mean(axis=0), 0, atol=1e-6)
    assert np.allclose(x_train[:, :3].std(axis=0), 1, atol=1e-5)
    assert np.all(x_train[:, 3] == 0) and np.all(x_test[:, 3] == 0)  # (5 - 5) / 1, not a division by 0
    assert not np.allclose(x_test[:, :3].mean(axis=0), 0, atol=1e-6)  # the test part's own stats unused
