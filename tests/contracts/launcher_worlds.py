"""The stacks the launcher contract runs its program on, one small adapter per launcher: a live
stack made through the realizer registry, and what its nodes need before a program that costs
nothing to start can run there (an SSH node: the code folder that bootstrap would sync; a
simulated GKE cluster: an image it stands in for). The contract (test_launcher_contract.py) asks
only these, and the launcher the registry picks for the inventory."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pytest

from infra.providers import realizers
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import load_stack


@dataclass
class Stack:
    cluster: ClusterSpec
    inventory: Inventory
    image: str | None  # what the launch names as its image: None runs on the nodes' own files


def _up(spec: ClusterSpec, progress: Callable[[str], None]) -> Inventory:
    return realizers.for_spec(spec).up(spec, progress)


def _down(spec: ClusterSpec) -> None:
    realizers.for_stack(spec.name).down(spec.name, force=True, progress=lambda _: None)


def _code_folders(inventory: Inventory) -> None:
    """What the program's working directory needs on each node: the code folder `bootstrap`
    syncs (the program here is a shell's, so nothing else of bootstrap's)."""
    from bootstrap.plan import node_paths
    from bootstrap.ssh import open_connection

    for node in inventory.nodes:
        with open_connection(inventory, node, deadline=time.monotonic() + 30) as conn:
            conn.run(f"mkdir -p {node_paths(node)['code']}", hide=True, in_stream=False)


@contextlib.contextmanager
def ssh_stack(_request: pytest.FixtureRequest) -> Iterator[Stack]:
    from conftest import leftovers, private_home

    with pytest.MonkeyPatch.context() as monkeypatch, private_home(monkeypatch):
        spec = load_stack("local", name="lcontract", overrides={"nodes": 2})
        inventory = _up(spec, lambda _: None)
        try:
            _code_folders(inventory)
            yield Stack(spec, inventory, image=None)
        finally:
            _down(spec)
            assert leftovers(spec.name) == []


@contextlib.contextmanager
def gke_stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    from gcpsim.kubernetes import images
    from tests.fakes.sim_stacks import shared_project

    with shared_project(request, "contract-gke") as (simulated, project):
        spec = project.stack("gke-l4")
        # The simulated cluster pulls no images: this one it runs as this machine's shell, in a
        # folder of each pod's own.
        image = f"us-central1-docker.pkg.dev/{project.id}/contract/shell:1"
        images.register(simulated.home, image, env=None, workdir=None, describe="the host's shell")
        try:
            inventory = _up(spec, lambda _: None)
            yield Stack(spec, inventory, image=image)
        finally:
            _down(spec)
            project.next_command()


STACKS: dict[str, Callable[[pytest.FixtureRequest], Any]] = {"ssh": ssh_stack, "gke": gke_stack}
