"""The controller's record, in a stack's state, of the code tree it last put on each node:
what decides how a node's sync starts (bootstrap/node_runner.py, bootstrap/runner.py)."""

from __future__ import annotations


class SyncedNodes:
    """Which nodes of the stack this controller has put code on. A node it never synced gets its
    rsync started at once, alongside `ready` (a fresh node's tree is whole anyway); the others
    wait for `ready`, whose fingerprint chooses between nothing, a delta archive and rsync.
    A hint only: a wrong one costs the overlap, never correctness."""

    def __init__(self, stack: str) -> None:
        from infra.providers.stack_home import state_dir

        self.stack_dir = state_dir(stack)
        self.directory = self.stack_dir / "synced"

    def fresh(self, node: str) -> bool:
        return not (self.directory / node).exists()

    def last(self, node: str) -> str | None:
        """The tree this controller last put on the node (its sync fingerprint)."""
        try:
            return (self.directory / node).read_text().strip() or None
        except FileNotFoundError:
            return None

    def mark(self, node: str, fingerprint: str | None) -> None:
        if self.stack_dir.is_dir():  # never create a stack's state as a side effect
            self.directory.mkdir(exist_ok=True)
            (self.directory / node).write_text(fingerprint or "")

    def forget(self, nodes: list[str]) -> None:
        """Nodes that were replaced: their disks are new."""
        for node in nodes:
            (self.directory / node).unlink(missing_ok=True)
