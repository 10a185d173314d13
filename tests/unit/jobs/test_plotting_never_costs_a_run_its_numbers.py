"""Pictures are a by-product: drawing them from parallel trials must work, and a failure to draw
must never cost a run its numbers."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from infra.providers.inventory import Inventory
from trainctl.jobs import collect as collect_mod
from trainctl.jobs import sweep as sweep_mod

HISTORY = {"world_size": 2, "test_accuracy": 0.97,
           "history": [{"epoch": e, "train_loss": 1.0 / (e + 1), "test_loss": 1.2 / (e + 1),
                        "test_accuracy": 0.5 + e / 40} for e in range(20)]}
THREADS = 8
ROUNDS = 2  # with 8 threads released at once by a barrier: the overlap is what is tested, not the count


def test_loss_plots_drawn_from_many_threads_at_once_all_succeed(tmp_path: Path):
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def draw(worker: int) -> None:
        start.wait()
        for i in range(ROUNDS):
            try:
                assert collect_mod.plot_loss(HISTORY, tmp_path / f"loss-{worker}-{i}.png")
            except BaseException as exc:  # noqa: BLE001 - every thread's failure is the finding
                errors.append(exc)

    threads = [threading.Thread(target=draw, args=(w,)) for w in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(list(tmp_path.glob("loss-*.png"))) == THREADS * ROUNDS


def _fake_bucket(tmp_path: Path, monkeypatch) -> Inventory:
    import fsspec

    bucket = tmp_path / "bucket"
    (bucket / "job").mkdir(parents=True)
    (bucket / "job" / "metrics.json").write_text(json.dumps(HISTORY))
    monkeypatch.setattr(collect_mod, "bucket_fs", lambda inv: fsspec.filesystem("file"))
    monkeypatch.setattr(collect_mod, "state_dir", lambda stack: tmp_path / "state")
    return bucket


def test_collect_keeps_the_metrics_when_drawing_the_loss_plot_raises(tmp_path: Path, monkeypatch):
    bucket = _fake_bucket(tmp_path, monkeypatch)

    def broken(*args, **kwargs):
        raise ValueError("ParseException: exception raised in parse action")

    monkeypatch.setattr(collect_mod, "plot_loss", broken)
    inventory = Inventory.model_construct(stack="fake", storage_emulator_host=None)
    dest = tmp_path / "run"
    with pytest.warns(UserWarning, match="loss.png"):
        missing = collect_mod.collect(inventory, str(bucket / "job"), ("metrics.json",), dest)
    assert missing == []
    assert json.loads((dest / "metrics.json").read_text()) == HISTORY
    assert not (dest / "loss.png").exists()
