"""`plan`'s capacity table: per pool, how its VMs get capacity and each quota metric it needs
against what the project has free (the realizer's capacity rows, see PlanRow)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainctl.cli.output import table

if TYPE_CHECKING:
    from rich.table import Table

    from infra.providers.protocol import PlanRow


def _free(line: dict[str, Any], read: bool) -> str:
    if line["free"] is None:
        return "no limit" if read else "not read"
    return f"{line['free']:g}"


def capacity_table(rows: list[PlanRow]) -> Table | None:
    """One line per pool and quota metric; None when the provider shows no capacity."""
    pools = [r for r in rows if r.is_capacity]
    if not pools:
        return None
    shown = table("pool", "provisioning", "quota", "where", "needed", "free")
    for pool in pools:
        read = "quota_free" not in pool.values
        up = int(pool.values.get("existing", 0))
        name = f"{pool.name} ({up} of {pool.values['nodes']} up: counted in use)" if up else pool.name
        lines = pool.values.get("quota") or []
        if not lines:
            shown.add_row(name, str(pool.values["provisioning"]), "-", "-", "-", "-")
        for i, line in enumerate(lines):
            first = i == 0
            shown.add_row(name if first else "", str(pool.values["provisioning"]) if first else "",
                          line["metric"], line["region"], f"{line['needed']:g}", _free(line, read))
    return shown


def capacity_note(rows: list[PlanRow]) -> str | None:
    """Why the free quota is not shown, where it is not."""
    why = {str(r.values["quota_free"]) for r in rows if r.is_capacity and "quota_free" in r.values}
    return f"free quota {'; '.join(sorted(why))}" if why else None
