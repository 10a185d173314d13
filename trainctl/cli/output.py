"""Where trainctl's output goes: results (tables, plans, listings) on stdout, progress and errors
on stderr (trainctl/cli/progress.py), so that `trainctl plan > plan.txt` holds the plan.

On a terminal a table fits the window and wraps long cells; in a file, a pipe or a CI log
nothing is cut: rich would otherwise lay tables out for 80 columns and elide names mid-token."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich's tables load with the first result that needs one
    from rich.console import Console
    from rich.table import Table

# Wide enough for any row trainctl prints; a table is only as wide as its content.
UNBOUNDED_WIDTH = 100_000


def results_console() -> Console:
    from rich.console import Console

    wide = None if sys.stdout.isatty() else UNBOUNDED_WIDTH
    return Console(file=sys.stdout, width=wide, highlight=False, soft_wrap=False)


def table(*columns: str) -> Table:
    from rich.table import Table

    shown = Table()
    for column in columns:
        shown.add_column(column, overflow="fold")  # wrapped where it must be, never elided
    return shown


def show(title: str, rows: Table) -> None:
    """A titled table on stdout; the title is a line of its own (grep finds it, no padding)."""
    console = results_console()
    console.print(title, markup=False, soft_wrap=True)
    console.print(rows)


def result(line: str) -> None:
    """One line of a result on stdout (rich markup allowed, never wrapped)."""
    results_console().print(line, soft_wrap=True)
