"""A multislice TPU stack in a simulated project, end to end: tpu-v5e-2x16's one queued resource
grants both v5litepod-16 slices (4 workers each, every worker a real machine behind the simulator),
bootstrap reaches all eight workers, and each worker's program sees the MEGASCALE_* variables of
its own slice; nothing is left afterwards."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, run_simulated, simulated_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
# The worker's view of its slice, printed by a shell under torchrun (on the simulated TPU workers,
# CPUs standing in for the chips, torchrun starts the program).
SHOW = "echo megascale $MEGASCALE_SLICE_ID $MEGASCALE_NUM_SLICES $MEGASCALE_COORDINATOR_ADDRESS"


def test_every_worker_of_two_granted_slices_runs_with_its_slices_megascale_variables(simulated_home, tmp_path):
    log = run_simulated(tmp_path, "multislice", f"""name: multislice
stack: tpu-v5e-2x16
code: {REPO}
requirements: trainers/requirements.txt
run:
  framework: torch
  command: sh -c '{SHOW}'
ttl_hours: 1
""")
    assert re.search(r"queuedResources/multislice-\w+-tpu: ACTIVE", log), log[-4000:]
    workers = set(re.findall(r"^\[([^\]\s]+)[^\]]*\]:megascale (\d) (\d) (\S+)$", log, re.M))
    assert len({worker for worker, *_ in workers}) == 8, log[-4000:]  # every worker of both slices
    assert sorted(Counter(s for _, s, _, _ in workers).items()) == [("0", 4), ("1", 4)], workers
    assert {n for _, _, n, _ in workers} == {"2"}
    assert len({address for *_, address in workers}) == 1 and next(iter(workers))[3].endswith(":8081")
    assert _leftovers(simulated_home) == []
