"""The process that hosts torchrun's rendezvous store and runs node 0's agent: a store that
cannot start fails the node at once, with the reason, and takes its agent down with it (the
agents could not meet). Its behaviour under real torchrun agents: tests/e2e/test_failing_ranks.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trainctl.launchers.rendezvous_store import hosting


def test_a_store_that_cannot_start_ends_its_agent_and_says_why(tmp_path: Path):
    # This interpreter has no torch: the store cannot start, as when its port is taken.
    agent = ["sh", "-c", f"trap 'touch {tmp_path}/stopped; exit 0' TERM; touch {tmp_path}/started; "
                         "while :; do sleep 0.05; done"]
    done = subprocess.run(hosting(sys.executable, "127.0.0.1", 29400, agent), capture_output=True, text=True,
                          timeout=20)
    assert done.returncode == 1
    assert "the rendezvous store could not start on port 29400: No module named 'torch'" in done.stderr
    assert not (tmp_path / "started").exists() or (tmp_path / "stopped").exists()
