"""A multislice TPU stack in a simulated project, through the realizer (API only: no machines; in
the e2e tier for its cost, a `pulumi up` and a `destroy`): tpu-v5e-2x16's one queued resource
grants both v5litepod-16 slices, the inventory holds all eight workers with their slice and the
host keys each worker published, the launch gives every worker the MEGASCALE_* variables of its
own slice with slice 0's worker 0 as the coordinator, and `down` leaves no request and no TPU.

That a worker's program sees the variables its launch command sets, and that bootstrap reaches a
TPU VM's worker over its pinned host keys, are proved on real machines by the runs that start
programs (tests/e2e/test_queued_tpu_on_the_simulator.py for a TPU worker); the launch command's
variables for a hand-made inventory in tests/unit/launchers/ssh/test_megascale_env.py."""

from __future__ import annotations

import shlex
from collections import Counter

import pytest

from infra.providers.gcp import realizer
from infra.providers.gcp.program.tpu import tpu_name
from tests.e2e.test_queued_tpu_lifecycle_on_the_simulator import assert_down_leaves_no_request, queue_state
from tests.fakes.sim_stacks import Project, gcp, make_gcp, simulated_gcp  # noqa: F401 (fixtures)
from tests.integration.providers.gcp.test_gcp_spot_repair import pinned, published
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import plan as launch_plan

pytestmark = pytest.mark.e2e

STACK = "tpu-v5e-2x16"
# The worker's view of its slice, as a program would print it.
SHOW = "echo megascale $MEGASCALE_SLICE_ID $MEGASCALE_NUM_SLICES $MEGASCALE_COORDINATOR_ADDRESS"


def megascale_of(command: str) -> dict[str, str]:
    return dict(w.split("=", 1) for w in shlex.split(command) if w.startswith("MEGASCALE_"))


def test_every_worker_of_two_granted_slices_runs_with_its_slices_megascale_variables(gcp: Project) -> None:  # noqa: F811
    spec = gcp.stack(STACK)
    inventory = realizer.up(spec, gcp.progress)
    assert queue_state(gcp, spec) == "ACTIVE"
    workers = {n.name: n for n in inventory.nodes}
    assert len(workers) == 8 and sorted(Counter(n.tpu_slice for n in inventory.nodes).items()) == [(0, 4), (1, 4)]
    for s in range(2):  # each slice's workers, reachable over the host keys they published
        node = gcp.tpu_node(spec.zone or "", f"{tpu_name(spec)}-{s}")
        assert node is not None and node["state"] == "READY"
        assert {k: v for k, v in pinned(inventory).items() if workers[k].tpu_slice == s} == published(gcp, node)

    commands = launch_plan(inventory, LaunchSpec(run_id="multislice", framework="torch", command=("sh", "-c", SHOW)))
    assert sorted(commands) == sorted(workers)  # every worker of both slices runs the program
    coordinator = f"{inventory.rank0.internal_ip}:8081"
    assert inventory.rank0.tpu_slice == 0
    for name, command in commands.items():
        assert megascale_of(command) == {
            "MEGASCALE_COORDINATOR_ADDRESS": coordinator, "MEGASCALE_NUM_SLICES": "2",
            "MEGASCALE_SLICE_ID": str(workers[name].tpu_slice), "MEGASCALE_PORT": "8081"}, (name, command)
    assert_down_leaves_no_request(gcp, spec)
    assert [s for s in range(2) if gcp.tpu_node(spec.zone or "", f"{tpu_name(spec)}-{s}") is not None] == []
