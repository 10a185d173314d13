"""Per-node status for long work: a live rich table on a terminal, one line per change elsewhere."""

from __future__ import annotations

import threading
import time
from textwrap import shorten
from typing import TYPE_CHECKING

from trainctl.cli.output import console

if TYPE_CHECKING:  # loaded with the first board: a CLI that only prints a line never needs them
    from rich.live import Live
    from rich.table import Table

# A live board keeps a row per node on screen: a long detail is shortened there (the whole of it
# is in the failure report that follows).
BOARD_DETAIL_CHARS = 120

STYLE = {"waiting": "dim", "running": "yellow", "done": "green", "skipped": "cyan",
         "failed": "bold red", "not needed": "cyan", "interrupted": "yellow"}


class NodeBoard:
    """Context manager; call it as a Reporter from any thread."""

    def __init__(self, title: str, nodes: list[str], steps: list[str]) -> None:
        self.title = title
        self.nodes = nodes
        self.steps = steps
        self.cells: dict[tuple[str, str], str] = {(n, s): "waiting" for n in nodes for s in steps}
        self.details: dict[str, str] = {n: "" for n in nodes}
        self.started: dict[tuple[str, str], float] = {}
        self.lock = threading.Lock()
        self.live: Live | None = None
        self.shown = False

    def __enter__(self) -> NodeBoard:
        # The console (rich) loads at the first report, not here: a bootstrap's first rsyncs
        # start before any report, and 40-60 ms of imports here came before them.
        return self

    def _show(self) -> None:
        """A live table on a terminal, lines elsewhere: decided once, under the lock."""
        if self.shown:
            return
        self.shown = True
        if console().is_terminal:
            from rich.live import Live

            self.live = Live(self.render(), console=console(), refresh_per_second=8, transient=False)
            self.live.__enter__()

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self._show()
        if self.live:
            self.live.update(self.render())
            self.live.__exit__(None, None, None)

    def __call__(self, node: str, step: str, status: str, detail: str = "") -> None:
        with self.lock:
            self._show()
            key = (node, step)
            if status == "running":
                self.started[key] = time.monotonic()
            elapsed = time.monotonic() - self.started.get(key, time.monotonic())
            self.cells[key] = status
            if detail:
                self.details[node] = detail
            if self.live:
                self.live.update(self.render())
            elif status != "running":
                extra = f" — {detail}" if detail else ""
                console().print(f"  {node:>8} {step:<8} {status} ({elapsed:.1f}s){extra}",
                              style=STYLE.get(status, ""), markup=False)  # details quote output

    def render(self) -> Table:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=self.title, title_justify="left", expand=False)
        table.add_column("node")
        for s in self.steps:
            table.add_column(s)
        table.add_column("detail", overflow="fold", max_width=60)
        for n in self.nodes:
            cells = [f"[{STYLE.get(self.cells[(n, s)], '')}]{self.cells[(n, s)]}[/]" for s in self.steps]
            table.add_row(n, *cells, Text(shorten(self.details[n], BOARD_DETAIL_CHARS, placeholder=" …")))
        return table


def bootstrap_board(stack: str, nodes: list[str], *, setup: bool, image: bool) -> NodeBoard:
    """A column for each bootstrap step that will run: an image is pulled instead of the code
    synced and the environment installed."""
    steps = ["ready", "drivers", "runtime", "pull"] if image else ["ready", "drivers", "sync", "env",
                                                                  *(["setup"] if setup else [])]
    return NodeBoard(f"bootstrap {stack}", nodes, steps)


def data_board(stack: str, nodes: list[str]) -> NodeBoard:
    """One row per node while it stages: objects and MB so far, then what it copied and kept."""
    return NodeBoard(f"data staging {stack}", nodes, ["data"])
