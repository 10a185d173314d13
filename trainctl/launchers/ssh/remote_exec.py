"""One shell command on many nodes at once, each node's output prefixed and logged; and the
reachability probe `trainctl status` shows. Both over the pinned-host-key SSH layer."""

from __future__ import annotations

import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from bootstrap.plan import node_paths
from bootstrap.ssh import open_connection, shell_env
from infra.providers.inventory import Inventory, Node
from trainctl.launchers.lines import LinePrinter
from trainctl.launchers.result import NodeOutcome

MAX_PARALLEL = 32


def run_everywhere(inventory: Inventory, nodes: list[Node], command: str, log_dir: Path,
                   echo: Callable[[str], None]) -> dict[str, int]:
    """Exit code per node (-1: it could not be reached); all nodes at once."""
    log_dir.mkdir(parents=True, exist_ok=True)

    def run_on(node: Node) -> int:
        outcome = NodeOutcome(node.name, node.rank)
        printer = LinePrinter(node.name, log_dir / f"{node.name}.log", echo, outcome)
        try:
            with open_connection(inventory, node, deadline=time.monotonic() + 30) as conn:
                return conn.run(where_jobs_run(inventory, node, command), warn=True, hide=False, out_stream=printer,
                                err_stream=printer, in_stream=False).exited
        except Exception as exc:
            printer.write(f"error: {exc}\n")
            return -1
        finally:
            printer.close()

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(nodes)))) as pool:
        return dict(zip((n.name for n in nodes), pool.map(run_on, nodes)))


def where_jobs_run(inventory: Inventory, node: Node, command: str) -> str:
    """A shell line run where `launch` runs the job: in the code folder bootstrap synced (the
    login directory before there is one), with the node's environment and its venv first on PATH."""
    paths = node_paths(node)
    env = {**inventory.node_env, "VIRTUAL_ENV": paths["venv"]}
    return (f"cd {shlex.quote(paths['code'])} 2>/dev/null; {shell_env(env)}"
            f"export PATH={shlex.quote(paths['venv'] + '/bin')}:\"$PATH\"; {command}")


def probe(inventory: Inventory, timeout: float = 5) -> list[tuple[Node, float | None, str]]:
    """Per node: seconds a verified SSH round trip took, or None and why it failed."""

    def one(node: Node) -> tuple[Node, float | None, str]:
        start = time.monotonic()
        try:
            with open_connection(inventory, node, deadline=time.monotonic() + timeout) as conn:
                conn.run("true", hide=True, in_stream=False)
            return node, time.monotonic() - start, ""
        except Exception as exc:
            return node, None, f"{type(exc).__name__}: {exc}"

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(inventory.nodes)))) as pool:
        return list(pool.map(one, inventory.nodes))
