"""The ledger's arithmetic: goodput and badput in node-seconds, costs at the catalog's list
prices per interval kind, the spot saving against the same nodes on demand, reserved nodes
priced on demand, and a ledger read back from its JSON as it was written."""

from __future__ import annotations

import pytest

from infra.spec import catalog
from infra.spec.cluster import ClusterSpec
from infra.spec.ledger import Interval, Ledger, NodeRate
from infra.spec.ledger_prices import fixed_per_hour, node_rates
from infra.spec.stack_config import load_stack

NODES = ("node0", "node1")


def spec(**overrides) -> ClusterSpec:
    """stacks/Pulumi.gpu-l4-spot.yaml: two g2-standard-8 (one L4 each), on demand unless asked."""
    return load_stack("gpu-l4-spot", overrides={"spot": False, **overrides})


def ledger(rates: tuple[NodeRate, ...]) -> Ledger:
    return Ledger(run_id="r", started=0.0, ended=100.0, nodes=rates, intervals=(
        Interval(kind="provisioning", start=0, end=20, nodes=NODES),
        Interval(kind="productive_training", start=20, end=80, nodes=NODES),
        Interval(kind="idle", start=80, end=90, nodes=("node1",)),
        Interval(kind="other", start=80, end=90, nodes=("node0",)),
        Interval(kind="teardown", start=90, end=100, nodes=NODES)))


def test_goodput_is_productive_time_over_wall_time_and_badput_the_rest_by_cause():
    accounted = ledger(node_rates(spec(), list(NODES), priced=True))
    assert accounted.goodput == 0.6
    assert accounted.badput == {"provisioning": 0.2, "other": 0.05, "idle": 0.05, "teardown": 0.1}
    assert accounted.goodput + sum(accounted.badput.values()) == pytest.approx(1.0)
    assert accounted.seconds_by_kind()["idle"] == 5.0  # one node of two for 10 s
    assert all(accounted.lane_seconds(n) == accounted.wall_seconds for n in NODES)


def test_costs_are_list_prices_per_interval_kind_and_add_up_to_the_total():
    accounted = ledger(node_rates(spec(), list(NODES), priced=True))
    hourly = catalog.MACHINES["g2-standard-8"].price  # its L4 is bundled in the machine's price
    node = accounted.nodes[0].usd_per_hour
    assert node > hourly  # and its boot disk
    assert accounted.usd_by_kind["productive_training"] == pytest.approx(2 * node * 60 / 3600, abs=1e-4)
    assert accounted.total_usd == pytest.approx(sum(accounted.usd_by_kind.values()), abs=1e-3)
    assert accounted.spot_saving_usd is None  # nothing on spot


def test_a_spot_run_shows_its_saving_against_the_same_nodes_on_demand():
    spot = ledger(node_rates(spec(spot=True), list(NODES), priced=True))
    on_demand = ledger(node_rates(spec(), list(NODES), priced=True))
    assert {n.capacity for n in spot.nodes} == {"spot"}
    assert spot.total_usd < on_demand.total_usd
    assert spot.spot_saving_usd == pytest.approx(on_demand.total_usd - spot.total_usd, abs=1e-3)


def test_reserved_nodes_are_priced_on_demand_and_local_nodes_cost_nothing():
    reserved = node_rates(spec(reservation="any"), list(NODES), priced=True)
    assert {n.capacity for n in reserved} == {"reservation"}
    assert reserved[0].usd_per_hour == reserved[0].on_demand_usd_per_hour > 0
    local = node_rates(ClusterSpec(name="t", nodes=2), list(NODES), priced=False)
    assert [(n.capacity, n.usd_per_hour) for n in local] == [("local", 0.0), ("local", 0.0)]
    assert fixed_per_hour(spec(), priced=True) == 0.0


def test_a_ledger_reads_back_from_its_json_with_its_figures_derived_again():
    accounted = ledger(node_rates(spec(spot=True), list(NODES), priced=True))
    text = accounted.model_dump_json()
    assert '"goodput":0.6' in text and '"spot_saving_usd"' in text  # what ledger.json shows readers
    assert Ledger.from_json(text) == accounted
