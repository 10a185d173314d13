"""`workdir:` artifacts: files a program leaves in its working directory on the chief (PyTorch's
DDP tutorial saves snapshot.pt next to its script) instead of in the job dir. They would go with
the node at teardown; collect copies them over the same pinned SSH as bootstrap, with rsync."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bootstrap.ssh import join, openssh_command
from infra.errors import RemoteError
from infra.providers.inventory import Inventory, Node
from trainctl.launchers.cluster_env import members
from trainctl.launchers.ssh.commands import job_workdir

# rsync: "partial transfer due to error", here a named file that does not exist on the chief
SOME_NOT_FOUND = 23


def chief(inventory: Inventory) -> Node:
    """The node whose files are the run's: the chief pool's, or rank 0 of a cluster without pools."""
    return (members(inventory, "chief") or [inventory.rank0])[0]


def fetch_from_chief(inventory: Inventory, run_id: str, image: str | None, paths: list[str],
                     into: Path) -> list[str]:
    """Copy each path (a file, or a folder's contents when it ends in '/') from the chief's
    working directory for the run to the same relative path under `into`, in one rsync;
    returns the paths the chief does not have."""
    node = chief(inventory)
    workdir = job_workdir(node, run_id, image).rstrip("/")
    into.mkdir(parents=True, exist_ok=True)
    # --relative keeps what follows '/./' in each source: a/b.pt lands in into/a/b.pt
    sources = [f"{node.ssh_host}:{workdir}/./{path}" for path in paths]
    # --copy-unsafe-links: a shared_dir link (snapshot.pt -> the run's shared folder) arrives as
    # the file it points to, not as a link to a path of the node's
    argv = ["rsync", "-a", "--relative", "--copy-unsafe-links", "-e", join(openssh_command(inventory, node)), *sources, f"{into}/"]
    done = subprocess.run(argv, capture_output=True, text=True, errors="replace")
    if done.returncode not in (0, SOME_NOT_FOUND):
        raise RemoteError(f"copying {', '.join(paths)} from {node.name}:{workdir} failed "
                          f"(rsync exit {done.returncode}): {done.stderr.strip()}")
    return [path for path in paths if not (into / path.rstrip("/")).exists()]
