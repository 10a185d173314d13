"""A run interrupted as its training began must exit once its teardown is done: the collector's
warm-up (a first look at the bucket, in the background) can be stuck on a bucket that is gone by
then, and must not keep the process alive."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

STUCK_WARM_UP = """
import time
from trainctl.jobs import collect

class StuckBucket:
    def ls(self, uri):
        time.sleep(600)  # a bucket whose address no longer answers

collect.bucket_fs = lambda inventory: StuckBucket()
inventory = type("Inventory", (), {"bucket_uri": "gs://gone"})()
collector = collect.Collector(inventory)
print("interrupted; teardown done")
"""


def test_a_stuck_warm_up_does_not_keep_the_process_alive():
    done = subprocess.run([sys.executable, "-c", STUCK_WARM_UP], cwd=REPO, capture_output=True, text=True,
                          timeout=120)  # a hang guard: stuck, the process would live the 600 s
    assert done.returncode == 0, done.stderr
    assert "teardown done" in done.stdout
