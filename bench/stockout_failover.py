"""A stockout in the first zone: from `trainctl run --simulate` to training, three ways, in one run.

  failover  zones [a, b, c] (us-central1); the machine type is stocked out in a and b, and a's
            refusal names c (and f) as having capacity: trainctl goes from a straight to c
  direct    the same run with zone c alone: what a user who knew where the capacity is would run
  blind     a blind ordered zone loop, as tools that retry other zones do: `trainctl run` in a,
            then b, then c, each refused run torn down before the next starts
Each is timed from the command until every rank has started training ("rank r/N on"); the runs
then finish (1 epoch) and tear down. Median of --rounds each, alternating. Goal (issue 32):
failover / direct <= 1.2. Simulated machines stand behind the VMs, so this needs root:

    TRAINCTL_HOME=/var/lib/trainctl-bench-failover .venv/bin/python bench/stockout_failover.py
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
NODES = 2
PROJECT = {"project": "my-project",  # what stacks/Pulumi.gpu-t4x2.yaml names
           "stockouts": [{"zone": ZONES[0], "machine_type": "n1-standard-8"},
                         {"zone": ZONES[1], "machine_type": "n1-standard-8"}]}
EXPERIMENT = """
name: {name}
stack: gpu-t4x2
overrides: {overrides}
code: {repo}
requirements: trainers/requirements.txt
run:
  framework: torch
  command: python -m trainers.digits_ddp --epochs 1 --job-dir {{job_dir}}
  processes_per_node: 1
restart: {{max_restarts: 0, job_retries: 0}}
ttl_hours: 1
"""


UP_PHASES: dict[str, list[float]] = {}  # run name -> its `up` phase, from the run's table of phases


def trainctl_run(work: Path, name: str, overrides: dict[str, object]) -> tuple[float | None, int]:
    """(seconds until every rank trains, or None when the run never got there; its exit code)."""
    path = work / f"{name}.yaml"
    path.write_text(EXPERIMENT.format(name=name, overrides=json.dumps({"nodes": NODES, **overrides}), repo=REPO))
    started = time.perf_counter()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "trainctl"), "run", str(path), "--simulate",
                             "--simulated-project", str(work / "project.yaml"), "--runs-dir", str(work / "runs")],
                            cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout
    ranks, training = 0, None
    for line in proc.stdout:
        if training is None and re.search(rf"rank \d/{NODES} on", line):
            ranks += 1
            training = time.perf_counter() - started if ranks == NODES else None
        phase = re.search(r"\bup\s+\S\s+([0-9.]+)", line)
        if phase:
            UP_PHASES.setdefault(re.sub(r"\d.*$", "", name), []).append(float(phase.group(1)))
    code = proc.wait()
    return training, code


def failover(work: Path, i: int) -> float:
    seconds, code = trainctl_run(work, f"failover{i}", {"zones": list(ZONES)})
    assert seconds is not None and code == 0, f"failover run {i} exited {code}"
    return seconds


def direct(work: Path, i: int) -> float:
    seconds, code = trainctl_run(work, f"direct{i}", {"zone": ZONES[2]})
    assert seconds is not None and code == 0, f"direct run {i} exited {code}"
    return seconds


def blind(work: Path, i: int) -> float:
    """Zone after zone, whole runs, until one trains: the refused ones end with exit 3 (no capacity)."""
    spent = 0.0
    for n, zone in enumerate(ZONES):
        started = time.perf_counter()
        seconds, code = trainctl_run(work, f"blind{i}z{n}", {"zone": zone})
        if seconds is not None:
            return spent + seconds
        assert code == 3, f"blind run {i} in {zone} exited {code}, not 3 (no capacity)"
        spent += time.perf_counter() - started
    raise AssertionError("no zone held the cluster")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    work = Path(tempfile.mkdtemp(prefix="trainctl-failover-", dir="/var/tmp"))
    (work / "project.yaml").write_text(json.dumps(PROJECT))
    ways = {"failover a -> c (hinted)": failover, "direct run in c": direct, "blind loop a, b, c": blind}
    samples: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for i in range(rounds):  # alternating, so a slower spell of the machine hits all three
            for name, way in ways.items():
                samples[name].append(way(work, i))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    median = {name: statistics.median(values) for name, values in samples.items()}
    for name, values in samples.items():
        print(f"{name + ':':28} {median[name]:.1f} s (samples {[round(x, 1) for x in values]})")
    for name, ups in UP_PHASES.items():
        print(f"`up` phase of {name} runs: median {statistics.median(ups):.1f} s (samples {ups})")
    ours, direct_run, loop = median.values()
    goal = "met" if ours / direct_run <= 1.2 else "MISSED"
    print(f"failover / direct {ours / direct_run:.2f} (goal <= 1.2: {goal}); failover / blind loop {ours / loop:.2f}")


if __name__ == "__main__":
    main()
