"""Where trainctl's output goes: results (tables, plans, listings, streamed node lines) on stdout,
progress, notes and errors on stderr, so that `trainctl plan > plan.txt` holds the plan.

On a terminal a table fits the window and wraps long cells; in a file, a pipe or a CI log
nothing is cut: rich would otherwise lay tables out for 80 columns and elide names mid-token.
rich loads with the first line that needs it: `trainctl --help` never does."""

from __future__ import annotations

import functools
import math
import sys
import threading
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


def usd(amount: float) -> str:
    """Dollars to the cent, and a smaller amount to its first two significant digits ($0.0042, not
    $0.00: a short run's saving is small, not nothing)."""
    size = abs(amount)
    if size >= 0.995 or size < 5e-7:
        return f"${amount:,.2f}"
    decimals = min(6, max(2, 1 - math.floor(math.log10(size))))
    return f"${amount:.{decimals}f}"


_OUT = threading.Lock()


def out(line: str) -> None:
    """One whole line at a time: every node's stream is echoed from its own thread, and print()
    writes the text and its newline separately, so two nodes' lines could run into one."""
    with _OUT:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


@functools.cache
def console() -> Console:
    """stderr, shared by messages and the node boards (trainctl/cli/progress.py). Off a terminal
    (a CI log, a file) lines are never wrapped at 80 columns: a path or a message stays whole."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else UNBOUNDED_WIDTH)


def say(message: str) -> None:
    console().print(message, soft_wrap=True)


def fail(title: str, details: str) -> None:
    """Failure details quote program output: never read them as rich markup."""
    console().print(title, style="bold red", markup=False)
    console().print(details, markup=False, highlight=False, soft_wrap=True)
