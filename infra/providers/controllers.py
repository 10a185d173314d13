"""Where a detached run's controller runs: one realizer of the controller per target.

The controller is trainctl itself, carrying out a run's whole lifecycle (trainctl/jobs/detached.py)
on a machine that is not the user's. What differs per target is only that machine: how it is
made and removed, how it is reached (a one-node Inventory, host key pinned), and how a command
on it gets the target's API (`on_target`). A target declares in its Capabilities whether it has
one; a target without one refuses `--detach` before anything is made. Adding one (a GCP VM, a
simulated project's VM) is a module implementing ControllerRealizer and a line in CONTROLLERS.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Protocol, cast

from infra.providers import realizers
from infra.providers.protocol import Progress

if TYPE_CHECKING:
    from infra.providers.inventory import Inventory
    from infra.spec.cluster import ClusterSpec

# provider name -> module implementing ControllerRealizer
CONTROLLERS = {"local": "infra.providers.local.controller_node"}


class ControllerRealizer(Protocol):
    def start(self, name: str, progress: Progress) -> Inventory:
        """Make the controller's machine and wait until it answers; its one-node inventory."""
        ...

    def inventory(self, name: str) -> Inventory | None:
        """The inventory `start` wrote; None where the controller is gone or never finished."""
        ...

    def exists(self, name: str) -> bool:
        """Whether the controller's machine is running."""
        ...

    def names(self) -> list[str]:
        """Every controller this target holds."""
        ...

    def on_target(self, command: str, cwd: str) -> str:
        """The shell line that runs `command` on the controller with the target's API."""
        ...

    def remove(self, name: str, progress: Progress) -> bool:
        """Remove the controller (safe to repeat, and from the controller itself); True if
        anything of it existed."""
        ...


def controller(provider: str) -> ControllerRealizer:
    return cast(ControllerRealizer, importlib.import_module(CONTROLLERS[provider]))


def for_spec(spec: ClusterSpec) -> ControllerRealizer:
    """The controller of runs on the spec's stack, or the refusal (exit 2) where it has none."""
    if realizers.capabilities(spec).controller is None or spec.provider not in CONTROLLERS:
        raise realizers.unsupported(spec.provider, "run --detach",
                                    "no controller runs there yet (a run's lifecycle would stay in this "
                                    "process); run it attached, or detach it on a local stack")
    return controller(spec.provider)


def all_names() -> list[tuple[str, str]]:
    """(provider, controller) for every controller of every target this machine reaches."""
    return [(provider, name) for provider in CONTROLLERS for name in controller(provider).names()]
