"""The realizer contract (infra/providers/protocol.py), proved once for every provider: the
local stack (root: namespaces, sshd) and a simulated GCP project. Each provider's stack is
made once for the module and shared by its cases, the last of which takes it down; how a
provider's world is listed is its adapter's (realizer_worlds.py), never a test's.

A new provider inherits the suite by a line in WORLDS and a param here."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from infra.errors import ConfigError
from infra.providers import realizers
from infra.providers.inventory import Inventory
from infra.providers.protocol import Capabilities, PlanRow
from tests.contracts.realizer_worlds import WORLDS, World
from tests.fakes.sim_stacks import simulated_gcp  # noqa: F401 (fixture, asked for by the GCP world)


class Live:
    """The shared stack: its world, what was planned and answered before `up`, and `up`'s inventory."""

    def __init__(self, world: World) -> None:
        self.world, self.spec = world, world.spec
        self.realizer = realizers.for_spec(world.spec)
        self.rows: list[PlanRow] = self.realizer.plan(world.spec)
        self.capabilities: Capabilities = self.realizer.capabilities(world.spec)
        self.inventory: Inventory = self.realizer.up(world.spec, world.progress)


@pytest.fixture(scope="module", params=[pytest.param("local", marks=pytest.mark.e2e), "gcp"])
def live(request: pytest.FixtureRequest) -> Iterator[Live]:
    with WORLDS[request.param](request) as world:
        stack = Live(world)
        try:
            yield stack
        finally:  # where a case failed before the last one's down (or that one failed)
            if world.left_behind() or world.existing() != world.observed([r for r in stack.rows if r.kept_on_down]):
                realizers.for_stack(world.spec.name).down(world.spec.name, force=True, progress=world.progress)
                world.next_command()


def realized(inventory: Inventory) -> dict[str, Any]:
    """The inventory but for how long its `up` took to place the nodes (a record of that call,
    not of the stack)."""
    dumped = inventory.model_dump()
    dumped["placement"] = [{k: v for k, v in attempt.items() if k != "seconds"} for attempt in dumped["placement"]]
    return dumped


def test_up_creates_exactly_what_its_plan_listed(live: Live) -> None:
    assert live.world.existing() == live.world.observed(live.rows)
    assert live.world.observed(live.rows), "the adapter sees none of the plan's rows: nothing is compared"


def test_capabilities_are_the_same_before_and_after_up(live: Live) -> None:
    assert live.realizer.capabilities(live.spec) == live.capabilities


def test_a_second_up_of_the_same_spec_changes_nothing_and_returns_the_same_inventory(live: Live) -> None:
    before = live.world.unchanged()
    again = live.realizer.up(live.spec, live.world.progress)
    assert realized(again) == realized(live.inventory)
    assert live.world.unchanged() == before
    assert realized(realizers.inventory(live.spec.name)) == realized(live.inventory)


def test_the_inventory_of_a_stack_that_is_not_up_is_refused_naming_it(live: Live) -> None:
    before = live.world.unchanged()
    with pytest.raises(ConfigError, match=f"stack '{live.world.absent}' is not up"):
        realizers.inventory(live.world.absent)
    assert live.world.unchanged() == before


def test_down_removes_all_but_what_the_plan_keeps_and_a_second_down_finds_nothing(live: Live) -> None:
    """The module's last case: it takes the shared stack down."""
    name, world = live.spec.name, live.world
    assert realizers.for_stack(name).down(name, force=False, progress=world.progress) is True
    world.next_command()
    assert world.existing() == world.observed([row for row in live.rows if row.kept_on_down])
    assert world.left_behind() == []
    assert realizers.for_stack(name).down(name, force=False, progress=world.progress) is False
    world.next_command()
    assert world.existing() == world.observed([row for row in live.rows if row.kept_on_down])
    assert world.left_behind() == []
