"""Run bootstrap plans on every node in parallel; one node's failure never hides another's.

Each node works through its steps in order over one pinned SSH connection; nodes run side by
side up to a concurrency cap. `ready` also reports the fingerprints stored on the node, so an
unchanged step is skipped without another round trip. When all nodes have finished, failures
are reported together, each with its node, step, exit code and the tail of its log.
"""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from bootstrap import cpu_torch
from bootstrap.node_runner import NodeResult, NodeRunner, Plans, Reporter, TreeSource
from bootstrap.plan import BootstrapSpec, check_inputs, plan, rsync_argv, tree_digest, tree_listing
from bootstrap.remote_stop import Interrupt
from bootstrap.synced_nodes import SyncedNodes
from bootstrap.treesync import TreeCache
from bootstrap.uv_cache import prefetch
from infra.errors import RemoteError
from infra.providers.inventory import Inventory, Node

DEFAULT_CONCURRENCY = 32
FAILED_FILE = "failed-nodes.json"


class BootstrapFailed(RemoteError):
    title = "bootstrap failed"

    def __init__(self, failures: list[NodeResult]) -> None:
        self.failures = failures
        parts = []
        for f in failures:
            code = f" (exit {f.exit_code})" if f.exit_code is not None else ""
            tail = "\n      ".join(f.log_tail().splitlines())
            parts.append(f"  {f.node}: step {f.failed_step} failed{code}: {f.error}\n      {tail}")
        super().__init__(f"bootstrap failed on {len(failures)} node(s):\n" + "\n".join(parts)
                         + "\n  rerun only these with --retry-failed")


def no_report(node: str, step: str, status: str, detail: str = "") -> None:
    pass


def run_node(inventory: Inventory, node: Node, plans: Future[Plans], log_dir: Path, report: Reporter = no_report,
             ready_timeout: float = 300.0, prefetched: Future | None = None, synced: SyncedNodes | None = None,
             early_sync: Future[tuple[int, str]] | None = None, interrupt: Interrupt | None = None) -> NodeResult:
    log_path = log_dir / f"{node.name}.log"
    result = NodeResult(node.name, log_path=log_path)
    with open(log_path, "a") as log:
        log.write(f"=== bootstrap {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        NodeRunner(inventory, node, plans, log, report, ready_timeout, prefetched,
                   synced, early_sync, interrupt).run(result)
    return result


def start_early_syncs(pool: ThreadPoolExecutor, inventory: Inventory, spec: BootstrapSpec,
                      nodes: list[Node], synced: SyncedNodes) -> dict[str, Future[tuple[int, str]]]:
    """A node this controller never synced needs its whole tree whatever `ready` finds, and
    rsync needs nothing from `ready`: start it at once, before the tree is even listed, so the
    longest step of a first bootstrap overlaps the connection, the probe and the listing. Output
    is kept apart and logged when the node's sync step takes the result."""

    def rsync(argv: list[str]) -> tuple[int, str]:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace")
        return done.returncode, done.stdout

    return {node.name: pool.submit(rsync, rsync_argv(inventory, node, spec))
            for node in nodes if synced.fresh(node.name)}


def tree_cache_dir() -> Path:
    from infra.providers.stack_home import cache_dir

    return cache_dir() / "trees"


def failed_last_time(log_dir: Path) -> list[str]:
    path = log_dir / FAILED_FILE
    return json.loads(path.read_text()) if path.exists() else []


def bootstrap(inventory: Inventory, spec: BootstrapSpec, log_dir: Path, *,
              nodes: list[str] | None = None, concurrency: int = DEFAULT_CONCURRENCY,
              report: Reporter = no_report) -> list[NodeResult]:
    log_dir.mkdir(parents=True, exist_ok=True)
    check_inputs(spec)  # before the first rsync starts
    spec = cpu_torch.for_nodes(inventory, spec)
    selected = inventory.select(nodes)
    synced = SyncedNodes(inventory.stack)
    workers = max(1, min(concurrency, len(selected)))
    def plans() -> Plans:
        if spec.image:  # code and environment are in the image
            return Plans({p.node.name: p for p in plan(inventory, spec, selected)}, None)
        listing = tree_listing(spec)
        cache = TreeCache(tree_cache_dir(), spec.code_dir)
        cache.save(tree_digest(spec, listing), listing)
        return Plans({p.node.name: p for p in plan(inventory, spec, selected, listing=listing)},
                     TreeSource(listing, cache))

    with ThreadPoolExecutor(max_workers=workers) as rsyncs, \
            ThreadPoolExecutor(max_workers=workers + 2) as pool:
        early: dict[str, Future[tuple[int, str]]] = {}
        prefetched: Future | None = None
        if not spec.image:
            early = start_early_syncs(rsyncs, inventory, spec, selected, synced)
            prefetched = pool.submit(prefetch, inventory, spec, log_dir)
        # Nodes connect while the tree is listed: the listing is the plan's sync fingerprint,
        # and no node needs it before `ready` has answered.
        planned = pool.submit(plans)
        interrupt = Interrupt()
        running = [pool.submit(run_node, inventory, node, planned, log_dir, report, spec.ready_timeout,
                               prefetched, synced, early.get(node.name), interrupt) for node in selected]
        try:
            results = [f.result() for f in running]
        except BaseException:  # Ctrl-C, SIGTERM: the nodes' steps stop now, not when they are done
            interrupt.fire()
            raise
    failures = [r for r in results if not r.ok]
    (log_dir / FAILED_FILE).write_text(json.dumps([f.node for f in failures]))
    if failures:
        raise BootstrapFailed(failures)
    return results
