"""The launcher contract (trainctl/launchers/protocol.py), proved once for every launcher: over
SSH on a live local stack, and as a Job on a simulated GKE stack (its pods processes of this
machine). The program is a shell's, which costs nothing to start, launched as TensorFlow's
(the program itself on every node, under TF_CONFIG, no torchrun: ssh/commands.py, gke/manifests.py).
Each launcher's stack is made once for the module (launcher_worlds.py); one successful run is
shared by the cases that read it, and one failing run is the failure case's.

A new launcher inherits the suite by a line in STACKS and a param here."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.contracts.launcher_worlds import STACKS, Stack
from tests.fakes.sim_stacks import simulated_gcp  # noqa: F401 (fixture, asked for by the GKE stack)
from trainctl.launchers.protocol import LaunchPlan
from trainctl.launchers.registry import launcher_for
from trainctl.launchers.result import LaunchResult
from trainctl.launchers.spec import LaunchSpec

pytestmark = pytest.mark.e2e  # SSH: namespaces and sshd; GKE: pods in mount and UTS namespaces

PLANNED, RAN = "contract-planned", "contract-ran"  # the plan's word, and the word run() is handed
# Says the word and TF_CONFIG; a worker fails on purpose with code 3 where FAIL_ON_WORKERS is set.
PROGRAM = ("sh", "-c", f'echo "said {PLANNED}"; echo "TF_CONFIG=$TF_CONFIG"; '
                       'case "$TF_CONFIG" in *\'"type":"worker"\'*) if [ "$FAIL_ON_WORKERS" = 1 ]; '
                       'then echo "failing on purpose"; exit 3; fi;; esac; exit 0')


@dataclass
class Ran:
    plan: LaunchPlan
    result: LaunchResult
    log_dir: Path
    echoed: list[str]

    def log(self, node: str) -> str:
        found = list(self.log_dir.rglob(f"{node}.log"))
        assert len(found) == 1, (node, found, sorted(p.name for p in self.log_dir.rglob("*")))
        return found[0].read_text()


@pytest.fixture(scope="module", params=["ssh", "gke"])
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    with STACKS[request.param](request) as made:
        yield made


def launch(stack: Stack, folder: Path, run_id: str, edit: bool = False, **env: str) -> Ran:
    """A dry run of the program, then run() of that plan; `edit`: of the plan with its word
    replaced, so that what runs can be told from what run() could derive anew."""
    launcher = launcher_for(stack.inventory)
    spec = LaunchSpec(run_id=run_id, framework="tensorflow", command=PROGRAM, image=stack.image,
                      max_restarts=0, job_retries=0, env=env)
    plan = launcher.dryrun(stack.cluster, stack.inventory, spec)
    handed = plan
    if edit:
        handed = replace(plan, commands={node: line.replace(PLANNED, RAN) for node, line in plan.commands.items()},
                         objects=json.loads(json.dumps(plan.objects).replace(PLANNED, RAN)))
    echoed: list[str] = []
    result = launcher.run(handed, folder / "logs", echoed.append)
    return Ran(plan, result, folder / "logs", echoed)


@pytest.fixture(scope="module")
def succeeded(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Ran:
    return launch(stack, tmp_path_factory.mktemp("ok"), "contract-ok", edit=True)


def said(text: str, what: str) -> list[str]:
    """What the program printed after `what=` (its lines, whatever prefix the launcher adds)."""
    return [m.group(1) for m in re.finditer(rf"{what}=(.*)$", text, re.M)]


def test_run_executes_the_plan_its_dry_run_gave(succeeded: Ran) -> None:
    assert PLANNED in succeeded.plan.render()
    for outcome in succeeded.result.outcomes:
        assert f"said {RAN}" in succeeded.log(outcome.node)
    assert not [line for line in succeeded.echoed if PLANNED in line], succeeded.echoed


def test_a_program_that_exits_0_on_every_node_is_ok(succeeded: Ran, stack: Stack) -> None:
    result = succeeded.result
    assert result.ok and result.failures() == [], result.describe_failures()
    assert sorted((o.rank, o.exit_code) for o in result.outcomes) == [
        (rank, 0) for rank in range(stack.cluster.node_count)]


def test_each_nodes_output_lands_in_its_own_log_under_the_log_dir(succeeded: Ran) -> None:
    logs = {o.node: succeeded.log(o.node) for o in succeeded.result.outcomes}
    assert len(logs) == len(succeeded.result.outcomes)
    for node, text in logs.items():
        assert len(said(text, "TF_CONFIG")) == 1, (node, text)  # its own program's lines, once


def test_the_program_sees_its_rank_and_the_world_in_tf_config(succeeded: Ran, stack: Stack) -> None:
    for outcome in succeeded.result.outcomes:
        (raw,) = said(succeeded.log(outcome.node), "TF_CONFIG")
        config: dict[str, Any] = json.loads(raw)
        expected = {"type": "chief", "index": 0} if outcome.rank == 0 else {"type": "worker", "index": outcome.rank - 1}
        assert config["task"] == expected, (outcome.node, raw)
        members = [m for role in ("chief", "worker") for m in config["cluster"].get(role, [])]
        assert len(members) == len(set(members)) == stack.cluster.node_count, raw


def test_a_program_failing_on_one_rank_is_named_with_its_node_rank_and_exit_code(
        stack: Stack, tmp_path: Path) -> None:
    ran = launch(stack, tmp_path, "contract-fail", FAIL_ON_WORKERS="1")
    result = ran.result
    (rank1,) = [o for o in result.outcomes if o.rank == 1]
    assert not result.ok
    assert [(o.node, o.rank, o.exit_code) for o in result.failures()] == [(rank1.node, 1, 3)]
    (line,) = [line for line in result.describe_failures().splitlines() if " failed: " in line]
    assert line.startswith(f"{rank1.node} (rank 1) failed: ") and "code 3" in line, line
    assert "failing on purpose" in result.describe_failures()  # its last lines, with it
