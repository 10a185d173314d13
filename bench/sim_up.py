"""`trainctl up` of a large GCP stack through the simulator, against the simulator's own floor.

    TRAINCTL_HOME=/var/lib/trainctl-bench .venv/bin/python bench/sim_up.py [--nodes 64] [--rounds 3]

Both sides run in this script, on API-only machines (no namespaces: a 64-VM stack is the API's
work alone) and a project whose operations take no time:
  - trainctl: the GCP realizer's `up` (quota pre-flight, the Automation API driving the `pulumi`
    stand-in, the program, the provider's REST calls with their reads and operation polls, host
    keys from guest attributes), for a stack of N n1-standard-8 VMs with two T4s each;
  - floor: the calls that `up` had to make for that, and nothing else (every mutating request
    and every guest-attribute read, as the simulator's journal recorded them), replayed straight
    at a fresh world of the same simulator: in recorded order, with consecutive calls of the same
    method (64 instance inserts) sent at once on 16 threads.
Prints each side's median and their ratio (trainctl / floor).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MUTATING = ("POST", "PUT", "PATCH", "DELETE")


def project_file(directory: Path, gpus: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "bench-project.yaml"
    path.write_text(json.dumps({"project": "bench-project", "default_delay": 0.0,
                                "quotas": {"global": {"GPUS_ALL_REGIONS": gpus},
                                           "us-central1": {"NVIDIA_T4_GPUS": gpus}}}))
    return path


def trainctl_up(home: Path, nodes: int, journal: Path) -> float:
    """One `up` in a fresh home (its own simulator), timed; the simulator journals every call."""
    os.environ["TRAINCTL_HOME"] = str(home)
    os.environ["TRAINCTL_SIM_JOURNAL"] = str(journal)
    from gcpsim import daemon
    from infra.providers import simulated_project
    from infra.providers.gcp import realizer
    from infra.spec.stack_config import load_stack

    spec = load_stack("gpu-t4x2", name="bench-up", overrides={"nodes": nodes, "project": "bench-project"})
    simulated_project.start_project("bench-project", project_file(home, 2 * nodes), api_only=True)
    try:
        start = time.perf_counter()
        inventory = realizer.up(spec, lambda _line: None)
        elapsed = time.perf_counter() - start
        assert len(inventory.nodes) == nodes and all(n.host_keys for n in inventory.nodes)
        return elapsed
    finally:
        daemon.stop(simulated_project.home())
        for key in ("TRAINCTL_GCP_API_ENDPOINT",):
            os.environ.pop(key, None)


def needed_calls(journal: Path) -> list[dict]:
    calls = [json.loads(line) for line in journal.read_text().splitlines()]
    return [c for c in calls if c["status"] == 200 and (
        c["verb"] in MUTATING or (c["method"] or "").endswith("getGuestAttributes"))]


def replay(home: Path, calls: list[dict], nodes: int) -> float:
    """The calls straight at a fresh world of the same simulator (same project id, so the
    recorded paths and bodies hold)."""
    from gcpsim.server import Simulator

    sim = Simulator(home)
    url = sim.start()
    body = json.loads(project_file(home, 2 * nodes).read_text())
    _send(url, {"verb": "POST", "target": "/trainctl-sim/v1/projects", "body": json.dumps(body)})
    groups: list[list[dict]] = []
    for call in calls:
        if groups and groups[-1][0]["method"] == call["method"]:
            groups[-1].append(call)
        else:
            groups.append([call])
    try:
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=16) as pool:
            for group in groups:
                list(pool.map(lambda c: _send(url, c), group))
        return time.perf_counter() - start
    finally:
        sim.stop()


def _send(url: str, call: dict) -> None:
    data = call["body"].encode() if call["body"] else None
    request = urllib.request.Request(url + call["target"], data=data, method=call["verb"],
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"replaying {call['verb']} {call['target']}: {exc.code} {exc.read()[:300]!r}") from None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = Path(os.environ.get("TRAINCTL_HOME", "/var/lib/trainctl-bench"))
    base.mkdir(parents=True, exist_ok=True)
    ups, floors = [], []
    for _ in range(args.rounds):
        work = Path(tempfile.mkdtemp(prefix="sim-up-", dir=base))
        try:
            journal = work / "journal.jsonl"
            ups.append(trainctl_up(work / "home", args.nodes, journal))
            calls = needed_calls(journal)
            floors.append(replay(work / "replay", calls, args.nodes))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    up, floor = statistics.median(ups), statistics.median(floors)
    print(f"{args.nodes} VMs, {len(calls)} calls needed; median of {args.rounds}")
    print(f"  floor (the needed calls replayed): {floor:.2f} s")
    print(f"  trainctl up through the simulator: {up:.2f} s   ratio {up / floor:.1f}x")


if __name__ == "__main__":
    main()
