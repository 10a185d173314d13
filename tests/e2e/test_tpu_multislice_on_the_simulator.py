"""A multislice TPU stack in a simulated project, end to end: one queued resource grants both
slices (each a real machine behind the simulator), bootstrap reaches every worker, and each
worker's program sees the MEGASCALE_* variables of its own slice; nothing is left afterwards.

Two single-host v5litepod-8 slices stand in for tpu-v5e-2x16 (2 x 4 hosts): eight namespaces with
sshd and a bootstrapped environment each are more than this 2-core machine runs in a test."""

from __future__ import annotations

import re
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
overrides:
  tpu: {{type: v5litepod-8, runtime_version: v2-alpha-tpuv5-lite, queued: true, slices: 2}}
code: {REPO}
requirements: trainers/requirements.txt
run:
  framework: torch
  command: sh -c '{SHOW}'
ttl_hours: 1
""")
    assert re.search(r"queuedResources/multislice-\w+-tpu: ACTIVE", log), log[-4000:]
    seen = sorted(set(re.findall(r"megascale (\d) (\d) (\S+)", log)))
    assert [(s, n) for s, n, _ in seen] == [("0", "2"), ("1", "2")], log[-4000:]
    assert len({address for _, _, address in seen}) == 1 and seen[0][2].endswith(":8081")
    assert _leftovers(simulated_home) == []
