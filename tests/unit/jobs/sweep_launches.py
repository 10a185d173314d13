"""A sweep's trials as plans: `run_sweep` (optuna, the budget's TrialClock, collect, trials.csv,
best.json) runs unchanged over a launcher whose `dryrun` is the SSH launcher's own, so each
trial's command lines are the ones a node would exec; its `run` keeps the plan and does, in the
trial's job dir on a GCS emulator, what the trainer's contract says a finished trial leaves
there: its metric reported through trainers.hypertune and its metrics.json. Real trials on real
nodes are tests/e2e/test_sweep_on_the_local_stack.py's."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from infra.providers.inventory import Inventory, Node
from trainctl.launchers.cluster_env import job_dir
from trainctl.launchers.protocol import Echo, LaunchPlan, Recovery
from trainctl.launchers.result import LaunchResult, NodeOutcome
from trainctl.launchers.ssh.launcher import OverSsh

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"


def emulated_inventory(spec_tasks: list, emulator: str, bucket: str = "my-bucket") -> Inventory:
    """The inventory the local realizer writes: one node per replica, its bucket on `emulator`."""
    return Inventory(
        stack="sweep-plan", provider="local", bucket_uri=f"gs://{bucket}", storage_emulator_host=emulator,
        ssh_private_key="/k", known_hosts="/kh",
        nodes=tuple(Node(name=f"node{i}", rank=i, internal_ip=f"10.0.0.{10 + i}", ssh_host=f"10.0.0.{10 + i}",
                         host_keys=(KEY,), workdir=f"/w/node{i}", task=task)
                    for i, (task, _) in enumerate(spec_tasks)))


def trial_params(plan: LaunchPlan) -> dict[str, str]:
    """The `--name=value` words the sweep appended to the trial's command."""
    return dict(word[2:].split("=", 1) for word in plan.spec.command if word.startswith("--") and "=" in word)


@dataclass
class PlannedTrials(OverSsh):
    """`metric(params)` is the value each trial reports; `advance(seconds)`, if given, is told
    how long each trial held the stack (the budget's clock)."""
    metric_name: str
    metric: Callable[[dict[str, str]], float]
    advance: Callable[[float], None] | None = None
    trial_seconds: float = 0.0
    plans: list[LaunchPlan] = field(default_factory=list)

    def run(self, plan: LaunchPlan, log_dir: Path, echo: Echo, cancel: threading.Event | None = None,
            recovery: Recovery | None = None) -> LaunchResult:
        from trainers import hypertune, storage

        self.plans.append(plan)
        value = self.metric(trial_params(plan))
        where = job_dir(plan.inventory, plan.run_id)
        hypertune.report(self.metric_name, value, step=1, job_dir=where)
        storage.write_bytes(storage.join(where, "metrics.json"), json.dumps({self.metric_name: value}).encode())
        if self.advance is not None:
            self.advance(self.trial_seconds)
        return LaunchResult(plan.run_id, [NodeOutcome(n.name, n.rank, exit_code=0) for n in plan.inventory.nodes])

    def hypertune_file(self, inventory: Inventory, run_id: str) -> str | None:
        return None  # trainers.hypertune's reports are in the job dir
