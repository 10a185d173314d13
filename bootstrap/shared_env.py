"""One environment for the nodes that see the controller's filesystem.

Offline nodes install from a seed environment that the controller builds once per requirements
(bootstrap.plan.seed_argv). Where the nodes are namespaces of the controller's own machine (the
local stack, a simulated project's VMs), each node's install would rebuild that same seed file by
file: torch's 29k hardlinks, 1.8 CPU-s of kernel time per node on a quiet machine and 3.8 in the
test suite, where nodes link the same inodes at once. Such nodes link their `venv` to the seed
instead, which is what a node's install would have made.

Not shared, so the node keeps an environment of its own, when it may be changed or would differ:
setup commands run with the environment active and may install into it, and an editable install
(`-e`, or a nested `-r` file that could hold one) points the seed at the controller's copy of the
code where each node's own would point at the node's synced copy.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from infra.providers.inventory import Inventory

if TYPE_CHECKING:  # bootstrap.plan builds its steps with this module
    from bootstrap.plan import BootstrapSpec

# Requirement lines that make an environment depend on where it was installed from.
_LOCAL_TO_THE_INSTALL = ("-e", "--editable", "-r", "--requirement")


def shares_the_seed(inventory: Inventory, spec: BootstrapSpec) -> bool:
    """Whether every node links its environment to the seed instead of installing its own."""
    if not (inventory.on_controller and inventory.offline_nodes and (spec.requirements or spec.packages)) or spec.setup:
        return False
    path = spec.code_dir / spec.requirements if spec.requirements else None
    lines = ((line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
             if path is not None and path.is_file() else ())
    return not any(line.startswith(_LOCAL_TO_THE_INSTALL) for line in lines)


def link_command(venv_path: str, seed: Path) -> str:
    """The node's `venv` as a link to the seed (an environment of its own from an earlier
    bootstrap is replaced); fails if the controller has not finished the seed."""
    venv, quoted_seed = shlex.quote(venv_path), shlex.quote(str(seed))
    return (f"[ -f {quoted_seed}/.complete ] && {{ [ -L {venv} ] || rm -rf {venv}; }} && "
            f"ln -sfn {quoted_seed} {venv} && [ -x {venv}/bin/python ]")
