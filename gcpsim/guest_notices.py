"""What GCE tells a running guest through its metadata server before taking its machine away
(gcpsim/nodes.py's machines): a preemption, whose shutdown also sends the
guest's processes SIGTERM (and is over once they have ended), or host maintenance
(`instance/maintenance-event`)."""

from __future__ import annotations

from typing import Any, Callable

from gcpsim import vpc
from gcpsim.ledger import Ledger
from namespace_nodes import metadata_admin, netns


class GuestNotices:
    ledger: Ledger

    def announce_preemption(self, key: str) -> None:
        if (rec := self._tell(key, metadata_admin.preempt)) is not None:
            netns.terminate_workload(rec["netns"])

    def shut_down(self, key: str) -> bool:
        """The guest's programs have all ended after the shutdown's SIGTERM (its sshd, PID 1,
        stays until the machine stops), or the machine is not running at all."""
        with self.ledger.edit() as data:
            rec = data["machines"].get(key)
            if rec is None or rec["status"] != "running":
                return True
            ns = rec["netns"]
        return not any(inner != 1 for inner in netns.guest_pids(ns).values())

    def announce_maintenance(self, key: str, event: str) -> None:
        self._tell(key, lambda admin, handle: metadata_admin.announce_maintenance(admin, handle, event))

    def _tell(self, key: str, call: Callable[[str, str], None]) -> dict[str, Any] | None:
        """`call(admin, handle)` on a running machine's metadata server; its record, or None."""
        with self.ledger.edit() as data:
            rec = data["machines"].get(key)
            if rec is None or rec["status"] != "running":
                return None
            call(vpc.Link(data["networks"][rec["network"]]["link"]).admin_url, rec["handle"])
            return dict(rec)
