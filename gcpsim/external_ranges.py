"""Each simulated world's own external-address range, claimed host-wide.

External addresses are routed in the root namespace (vpc.route_external), so two worlds on one
machine (two simulator homes: two users, or tests in parallel) must never hand out the same one.
Each world with real machines claims a /24 of EXTERNAL_POOL in a registry every world on this
machine reads and writes under one file lock (as local stacks pick their subnets under the
host allocation lock). A claim is kept for the life of its home and released by `cleanup_all`; one
whose home no longer exists (removed, or crashed before its cleanup) is free again.

The registry lives in /run: it is as old as the routes it keeps apart. After a reboot a world
claims the range its ledger recorded again, if no other world took it first.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
from pathlib import Path
from typing import Iterator

EXTERNAL_POOL = ipaddress.IPv4Network("10.213.0.0/16")
RANGE_PREFIX = 24  # 253 addresses per world (see compute_addresses), 256 worlds per machine
REGISTRY = Path("/run/trainctl-sim/external-ranges.json")


class NoFreeRange(RuntimeError):
    pass


@contextlib.contextmanager
def locked_claims(path: Path) -> Iterator[dict[str, str]]:
    """A host-wide claims file (here: range -> home), locked for the block (a lock file beside
    it) and replaced whole at its end: a crash midway leaves the previous claims, never half."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        claims: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
        before = dict(claims)
        yield claims
        if claims != before:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(claims, sort_keys=True))
            os.replace(tmp, path)
    finally:
        os.close(fd)


def owner_of(home: Path) -> str:
    """How a claims file names the home holding a claim."""
    return str(home.resolve())


def drop_gone_homes(claims: dict[str, str], owner: str) -> None:
    """Claims of homes that no longer exist (removed, or crashed before their cleanup) are free."""
    for claimed, holder in list(claims.items()):
        if holder != owner and not Path(holder).exists():
            del claims[claimed]


def claim(home: Path, recorded: str | None = None, registry: Path = REGISTRY) -> ipaddress.IPv4Network:
    """The range of `home`'s world: the one it holds, else the one its ledger `recorded` if that
    is free, else a free one (starting at a place derived from the home, so homes start apart)."""
    owner = owner_of(home)
    with locked_claims(registry) as claims:
        drop_gone_homes(claims, owner)  # nothing of a gone home can still be routed
        held = [net for net, holder in claims.items() if holder == owner]
        if held:
            return ipaddress.IPv4Network(held[0])
        candidates = list(EXTERNAL_POOL.subnets(new_prefix=RANGE_PREFIX))
        start = int(hashlib.sha1(owner.encode()).hexdigest(), 16) % len(candidates)
        ordered = candidates[start:] + candidates[:start]
        if recorded is not None:
            ordered.insert(0, ipaddress.IPv4Network(recorded))
        for candidate in ordered:
            if str(candidate) not in claims:
                claims[str(candidate)] = owner
                return candidate
    raise NoFreeRange(f"every /{RANGE_PREFIX} of {EXTERNAL_POOL} is claimed by a simulated world on this "
                      f"machine (see {registry}); remove simulator homes that are no longer needed")


def held_by(home: Path, registry: Path = REGISTRY) -> str | None:
    """The range `home` holds now, if any."""
    if not registry.exists():
        return None
    owner = owner_of(home)
    with locked_claims(registry) as claims:
        return next((net for net, holder in claims.items() if holder == owner), None)


def release(home: Path, registry: Path = REGISTRY) -> None:
    if not registry.exists():
        return
    owner = owner_of(home)
    with locked_claims(registry) as claims:
        for net in [net for net, holder in claims.items() if holder == owner]:
            del claims[net]
