"""A budget's stop begins early enough to pay for collecting what the run has saved so far: the
job dir of a real GCS emulator is listed as collect would fetch it, the time that takes is
estimated from its objects and bytes, and the stop moves that much earlier."""

from __future__ import annotations

import time

import pytest

from infra.spec.budget import STOP_RESERVE_SECONDS, Budget
from tests.unit.jobs.test_collect import bucket  # noqa: F401 - the fixture: a GCS emulator on loopback
from trainctl.jobs import collect_reserve
from trainctl.jobs.collect_reserve import Pending, pending, reserve_once
from trainctl.jobs.spending import Spending

PER_HOUR = 3.6  # max_usd $1 buys 1000 s of the stack
CHECKPOINTS = 30  # a checkpoint each epoch (the run that overspent collected 120)


def spending_from(said: list[str]) -> Spending:
    return Spending(Budget(max_usd=1.0), PER_HOUR, said.append)




def many_checkpoints(fs) -> None:
    fs.pipe({**{f"b/run/checkpoints/ckpt-{i:09d}.pt": b"c" * 1000 for i in range(CHECKPOINTS)},
             "b/run/checkpoints/LATEST": b"{}", "b/run/metrics.json": b"{}", "b/run/trace/big.bin": b"x" * 5000})


def test_the_collect_is_estimated_from_the_objects_it_would_fetch(bucket):  # noqa: F811
    _inventory, fs = bucket
    many_checkpoints(fs)
    found = pending(fs, "gs://b/run", ("checkpoints/", "metrics.json", "workdir:out.txt"))
    assert (found.objects, found.bytes) == (CHECKPOINTS + 2, CHECKPOINTS * 1000 + 2 + 2)  # not trace/
    assert found.request_seconds is not None and found.request_seconds > 0  # this run's own request
    assert found.seconds() >= found.objects * found.request_seconds
    # nothing measured yet: a conservative second an object
    assert Pending(CHECKPOINTS, 0).seconds() == CHECKPOINTS * collect_reserve.DEFAULT_SECONDS_PER_OBJECT


def test_a_run_with_many_checkpoints_begins_its_stop_early_enough_to_collect_them(bucket, monkeypatch):  # noqa: F811
    _inventory, fs = bucket
    many_checkpoints(fs)
    # a bucket as slow for these as it was where 120 checkpoints took 110 s to collect
    monkeypatch.setattr(collect_reserve, "BYTES_PER_SECOND", CHECKPOINTS * 1000 / 110)
    said: list[str] = []
    with spending_from(said).watching() as spending:
        assert spending.stops_at == 1000 - STOP_RESERVE_SECONDS  # before anything is saved
        found = reserve_once(spending, fs, "gs://b/run", ("checkpoints/",))
        assert found.seconds() >= 110
        assert spending.stops_at == pytest.approx(1000 - STOP_RESERVE_SECONDS - found.seconds())
        # stopping then still pays for the checkpoint and teardown and for the collect
        assert spending.stops_at + STOP_RESERVE_SECONDS + found.seconds() <= 1000
        assert not spending.affords(1000 - STOP_RESERVE_SECONDS - 100)  # a sweep's next trial sees it too


def test_a_collect_that_no_longer_fits_starts_the_stop_at_once_and_says_what_it_keeps_back():
    said: list[str] = []
    spending = spending_from(said)
    with spending.watching():
        spending._started = time.monotonic() - 900  # the stack came up 900 s ago
        spending.reserve_for_collect(110.0, "collecting 120 object(s), 0.1 MB: ~110 s")
        assert spending.reached.wait(timeout=10)
    assert "budget reached" in said[-1] and "collecting 120 object(s)" in said[-1]
