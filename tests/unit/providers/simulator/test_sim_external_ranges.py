"""Each simulated world claims its own external-address range on this machine: two homes never
share one, a home keeps its claim (and the one its ledger recorded), and a claim goes with its
home (released, or its home removed). The registry here is a private file; no root is needed."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from gcpsim import external_ranges
from gcpsim.external_ranges import EXTERNAL_POOL, claim, held_by, release
from tests.fakes.sim_compute import ZONE, ComputeSim, csim, instance_body, make_csim  # noqa: F401


def homes(tmp_path: Path, count: int) -> list[Path]:
    made = [tmp_path / f"home{i}" for i in range(count)]
    for home in made:
        home.mkdir()
    return made


def test_two_homes_get_disjoint_ranges_of_the_pool_and_each_keeps_its_own(tmp_path):
    registry = tmp_path / "run" / "ranges.json"
    a, b = homes(tmp_path, 2)
    ra, rb = claim(a, registry=registry), claim(b, registry=registry)
    assert not ra.overlaps(rb)
    assert ra.subnet_of(EXTERNAL_POOL) and rb.subnet_of(EXTERNAL_POOL) and ra.prefixlen == external_ranges.RANGE_PREFIX
    assert claim(a, registry=registry) == ra and held_by(b, registry=registry) == str(rb)


def test_a_home_claims_the_range_its_ledger_recorded_unless_another_home_holds_it(tmp_path):
    registry = tmp_path / "ranges.json"
    a, b, c = homes(tmp_path, 3)
    assert claim(a, recorded="10.213.42.0/24", registry=registry) == ipaddress.IPv4Network("10.213.42.0/24")
    taken = claim(b, recorded="10.213.42.0/24", registry=registry)
    assert taken != ipaddress.IPv4Network("10.213.42.0/24")
    release(a, registry=registry)
    assert held_by(a, registry=registry) is None
    assert claim(c, recorded="10.213.42.0/24", registry=registry) == ipaddress.IPv4Network("10.213.42.0/24")


def test_the_range_of_a_removed_home_is_free_again(tmp_path, monkeypatch):
    registry = tmp_path / "ranges.json"
    monkeypatch.setattr(external_ranges, "RANGE_PREFIX", 17)  # a pool of two ranges
    a, b, c = homes(tmp_path, 3)
    claim(a, registry=registry), claim(b, registry=registry)
    with pytest.raises(external_ranges.NoFreeRange, match="claimed by a simulated world"):
        claim(c, registry=registry)
    freed = held_by(a, registry=registry)
    a.rmdir()  # removed without its cleanup (a crash, rm -rf)
    assert str(claim(c, registry=registry)) == freed


def test_instances_get_external_addresses_from_their_worlds_range(csim):  # noqa: F811
    own = ipaddress.IPv4Network("10.213.77.0/24")
    csim.backend.external_range = lambda: own  # type: ignore[method-assign]
    csim.network()
    for name in ("vm-0", "vm-1"):
        assert csim.http("POST", csim.compute(f"zones/{ZONE}/instances"), instance_body(name))[0] == 200
    nat = [csim.http("GET", csim.compute(f"zones/{ZONE}/instances/{name}"))[1]["networkInterfaces"][0]
           ["accessConfigs"][0]["natIP"] for name in ("vm-0", "vm-1")]
    assert nat == ["10.213.77.2", "10.213.77.3"]  # .0 and .1 stay free, as in the whole pool
