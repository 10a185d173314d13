"""PyTorch's multi-node DDP tutorial (tests/data/ddp-tutorial: its snapshot a relative file that
rank 0 alone writes) on 3 local nodes with the experiment's `shared_dir: {links: [snapshot.pt]}`:
a worker killed mid-run, torchrun restarts the group in place, and every rank resumes from the
snapshot rank 0 wrote, at the same epoch, and the run finishes. Without the option rank 0 resumed
at epoch N and the others at 0 (tests/unit/launchers/test_diverged_resume.py names that case)."""

from __future__ import annotations

import json
import re
import time

import pytest

from conftest import REPO, Streamed, kill_on_node1, leftovers

pytestmark = pytest.mark.e2e

TUTORIAL = REPO / "tests" / "data" / "ddp-tutorial"
EPOCHS = 8  # ~1 s each at batch 8 on 2 cores: the kill lands after epoch 1's snapshot, long before the end
RESUMED = re.compile(r"^\[(node\d) r(\d)\]:Resuming training from snapshot at Epoch (\d+)$", re.M)


def test_a_killed_worker_restarts_the_group_and_every_rank_resumes_from_the_shared_snapshot(tmp_path, trainctl_home):
    exp = tmp_path / "tutorial.yaml"
    exp.write_text(f"""
name: tutorial
stack: local
overrides: {{nodes: 3}}
code: {TUTORIAL}
requirements: requirements.txt
run:
  command: python multinode.py {EPOCHS} 1 --batch_size 8
shared_dir:
  links: [snapshot.pt]
restart: {{max_restarts: 3, job_retries: 0}}
artifacts: [workdir:snapshot.pt]
ttl_hours: 1
""")
    runs = tmp_path / "runs"
    run, run_id = Streamed.run(exp, runs)
    run.wait_for(r"^\[node\d r0\]:Epoch 1 \| Training snapshot saved at snapshot.pt")
    kill_on_node1(run_id, "-u [m]ultinode.py")  # node1's worker (python -u multinode.py), not its agent
    killed = time.monotonic()
    for _ in range(3):
        run.wait_for(r"\]:Resuming training from snapshot at Epoch ")
    print(f"kill to the last rank's resume: {time.monotonic() - killed:.1f} s")
    output = run.finish(timeout=300)
    assert run.proc.returncode == 0, output[-4000:]
    assert re.search(r"\[node1\] .*failed \(exitcode: -9\)", output), output[-4000:]  # torchrun saw the kill
    resumed = {(node, int(rank)): int(epoch) for node, rank, epoch in RESUMED.findall(output)}
    assert sorted(resumed) == [("node0", 0), ("node1", 1), ("node2", 2)], output[-4000:]
    assert len(set(resumed.values())) == 1 and 1 <= min(resumed.values()) < EPOCHS - 1, resumed
    for rank in range(3):  # every rank trained to the end
        assert re.search(rf"^\[node\d r{rank}\]:\[GPU{rank}\] Epoch {EPOCHS - 1} \|", output, re.M), rank
    assert "resumed from different points" not in output
    # the snapshot each rank read is the one rank 0 wrote, in the run's shared folder: collected
    # from the chief's working directory through its link, as the file itself
    snapshot = runs / run_id / "snapshot.pt"
    assert snapshot.is_file() and not snapshot.is_symlink() and snapshot.read_bytes()[:2] == b"PK"
    print("phases (s):", json.loads((runs / run_id / "timings.json").read_text()))
    assert leftovers(run_id) == []
