"""The zones `up` tried before one held the cluster, as a table on stderr (progress, not a result)."""

from __future__ import annotations

from typing import Any

from trainctl.cli.output import console, table


def show_placement(attempts: tuple[dict[str, Any], ...]) -> None:
    """Nothing when there was no choice to make (one zone, placed at the first try)."""
    if len(attempts) < 2:
        return
    from rich.text import Text  # the provider's words are never read as markup
    rows = table("zone", "outcome", "seconds", "capacity named in", "why")
    for a in attempts:
        style = "green" if a["outcome"] == "up" else "yellow"
        rows.add_row(a["zone"], f"[{style}]{a['outcome']}[/]", f"{a['seconds']:.1f}",
                     ", ".join(a["capacity_in"]), Text(a["reason"]))
    console().print("zones tried", markup=False)
    console().print(rows)
