"""A multislice TPU stack on GKE in a simulated project, end to end: `run` stands the cluster up
with one multi-host slice node pool per slice, runs one Indexed Job per slice (each on its own
slice's pool), every pod of every slice sees its slice's MEGASCALE_* and TPU_WORKER_* values, and
the stack is gone afterwards.

Two v5p-16 slices (2 hosts each, the smallest multi-host shape) stand in for the stack's two
v5litepod-16 slices (4 hosts each): four nodes instead of eight on this 2-core machine."""

from __future__ import annotations

import re

import pytest

from gcpsim.apis.container_nodes import group_name
from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, run_simulated, simulated_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e

ZONE = "us-central1-a"  # where v5p is offered (the stack's own zone has no v5p)

# What a pod knows of the slices; the simulated kubelet names the node it put the pod on.
SHOW = ("echo slice $MEGASCALE_SLICE_ID of $MEGASCALE_NUM_SLICES at $MEGASCALE_COORDINATOR_ADDRESS "
        "worker $TPU_WORKER_ID of $TPU_WORKER_HOSTNAMES")


def test_every_pod_of_every_slice_runs_on_its_slices_pool_with_its_slices_values(simulated_home, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "README").write_text("nothing to install: the pods run a shell line\n")
    log = run_simulated(tmp_path, "gke-multislice", f"""name: gkeslice
stack: gke-tpu-v5e-2x16
overrides:
  zone: {ZONE}
  tpu: {{type: v5p-16, slices: 2}}
code: {code}
run:
  framework: torch
  command: sh -c '{SHOW}'
ttl_hours: 1
""")
    seen = sorted(set(re.findall(r"\[pod(\d)[^\]]*\]:slice (\d) of (\d) at (\S+) worker (\d) of (\S+)", log)))
    assert len(seen) == 4, log[-4000:]
    job = re.search(r"(\S+)-s0-0\.(\S+):8081", seen[0][3])
    assert job, seen
    for pod, slice_id, count, coordinator, worker, hostnames in seen:
        assert (int(slice_id), int(worker)) == divmod(int(pod), 2) and count == "2"
        assert coordinator == f"{job[1]}-s0-0.{job[2]}:8081"
        assert hostnames == ",".join(f"{job[1]}-s{slice_id}-{w}.{job[2]}" for w in range(2))
    # each slice's pods ran on nodes of that slice's pool (GKE names a pool's nodes after its group)
    placed = set(re.findall(r"pod \S+-s(\d)-\d-\w+ on node (\S+) is a process", log))
    assert len(placed) == 4 and len({node for _, node in placed}) == 4, placed
    stack = re.search(r"\b(gkeslice-[0-9a-f]{6})\b", log)[1]  # the experiment's own stack
    for slice_id, node in placed:
        pool = {"name": f"{stack}-pool-{slice_id}"}
        assert node.startswith(group_name({"location": ZONE, "name": f"{stack}-gke"}, pool, ZONE) + "-"), placed
    assert _leftovers(simulated_home) == []
