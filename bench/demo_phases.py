"""The demo's phases (`trainctl run examples/digits-ddp.yaml`), and collect and down against
their floors, measured in this one run on real local nodes.

  demo       the CLI as a user runs it; its phase times (runs/<id>/timings.json)
  collect    trainctl's collect of the same artifacts (gcsfs warmed while the job trained, as in
             a run) / a plain copy of the same objects from the emulator: urllib GETs of the
             JSON API's list and media URLs, nothing else (median of 15, alternating)
  down       `trainctl down` of a kept demo stack / removing another kept demo stack's
             namespaces, veths, bridge and forward rule by hand with ip and iptables, its
             directory moved aside as trainctl does (median of 3 stacks each)
Goal (issue 18): collect and down within 1.5x of their floors.
Run as root: TRAINCTL_HOME=/var/lib/trainctl-bench .venv/bin/python bench/demo_phases.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from infra.providers import realizers
from namespace_nodes import netns
from infra.providers.local.layout import Names
from infra.providers.stack_home import discard, state_dir
from trainctl.jobs.collect import Collector
from trainctl.jobs.experiment_file import load_experiment
from trainctl.launchers.cluster_env import job_dir

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "examples" / "digits-ddp.yaml"
SAMPLES = 15  # collect takes milliseconds: more samples than the seconds-long phases
STACKS = 3


def demo(runs: Path, keep: bool) -> tuple[str, dict[str, float]]:
    argv = [str(Path(sys.executable).parent / "trainctl"), "run", str(DEMO), "--runs-dir", str(runs)]
    done = subprocess.run(argv + (["--keep"] if keep else []), check=True, cwd=runs,
                          capture_output=True, text=True)
    run_id = re.search(r"\[trainctl\] run (\S+):", done.stdout + done.stderr).group(1)
    return run_id, json.loads((runs / run_id / "timings.json").read_text())


def plain_copy(endpoint: str, bucket: str, prefixes: list[str], dest: Path) -> None:
    for prefix in prefixes:
        query = urllib.parse.urlencode({"prefix": prefix})
        with urllib.request.urlopen(f"{endpoint}/storage/v1/b/{bucket}/o?{query}") as listing:
            items = json.load(listing).get("items", [])
        for item in items:
            name = urllib.parse.quote(item["name"], safe="")
            target = dest / item["name"]
            target.parent.mkdir(parents=True, exist_ok=True)
            with urllib.request.urlopen(f"{endpoint}/storage/v1/b/{bucket}/o/{name}?alt=media") as body:
                target.write_bytes(body.read())


def down_by_hand(stack: str) -> None:
    names = Names(stack)
    spaces = [ns for ns in netns.list_netns() if ns.startswith(names.netns_prefix)]
    for ns in spaces:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        if pids:
            subprocess.run(["kill", "-9", *pids], stderr=subprocess.DEVNULL)  # some have left already
        subprocess.run(["ip", "netns", "del", ns])
    for link in os.listdir("/sys/class/net"):
        if link.startswith(f"tcv{names.digest[:6]}"):
            # a veth whose namespace end is gone already went with it
            subprocess.run(["ip", "link", "del", link], stderr=subprocess.DEVNULL)
    subprocess.run(["iptables", "-D", *netns.host_forward_rule(names.bridge)])
    subprocess.run(["ip", "link", "del", names.bridge])
    discard(state_dir(stack))


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    exp = load_experiment(DEMO)
    work = Path(tempfile.mkdtemp(prefix="trainctl-demo-"))
    kept: list[str] = []
    try:
        _, phases = demo(work, keep=False)
        for _ in range(STACKS * 2):
            kept.append(demo(work, keep=True)[0])
        stack = kept[0]
        inventory = realizers.inventory(stack)
        bucket = inventory.bucket_uri.removeprefix("gs://")
        prefixes = [f"{stack}/{a}" for a in exp.artifacts]
        collector = Collector(inventory)
        collector.fs.result()
        ours, floor = [], []
        for i in range(SAMPLES):
            ours.append(timed(lambda: collector.collect(job_dir(inventory, stack), exp.artifacts,
                                                        work / f"ours-{i}")))
            floor.append(timed(lambda: plain_copy(inventory.storage_emulator_host, bucket, prefixes,
                                                  work / f"floor-{i}")))
        downs, by_hand = [], []
        for ours_stack, hand_stack in zip(kept[1::2], kept[2::2]):
            downs.append(timed(lambda: realizers.for_stack(ours_stack).down(ours_stack, force=False,
                                                                            progress=lambda _: None)))
            by_hand.append(timed(lambda: down_by_hand(hand_stack)))
    finally:  # the first stack, and whatever a failure left; `down --force` of a gone one is a no-op
        for stack in kept:
            realizers.for_stack(stack).down(stack, force=True, progress=lambda _: None)
        shutil.rmtree(work, ignore_errors=True)

    print("demo phases (s): " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()))
    rows = [("collect", statistics.median(ours), statistics.median(floor)),
            ("down", statistics.median(downs), statistics.median(by_hand))]
    print(f"{'phase':<9}{'trainctl s':>11}{'floor s':>9}{'ratio':>7}  goal")
    for name, a, b in rows:
        print(f"{name:<9}{a:>11.3f}{b:>9.3f}{a / b:>7.2f}  <= 1.5: {'met' if a / b <= 1.5 else 'MISSED'}")


if __name__ == "__main__":
    main()
