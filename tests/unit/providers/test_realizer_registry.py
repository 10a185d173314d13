"""The realizer seam: one module per provider behind one interface, chosen by the stack's
recorded provider; callers never branch on the provider themselves."""

from __future__ import annotations

import importlib
import inspect
import json
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from infra.providers import realizers
from infra.providers.realizers import PROVIDERS, Realizer
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import ConfigError, REPO_ROOT
from infra.providers.stack_home import record_provider, state_dir

@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state home holding only files: nothing here is realized, so nothing needs a down."""
    path = Path("/var/lib/trainctl-tests") / f"registry-{uuid.uuid4().hex[:12]}"  # TRAINCTL_HOME: not under /tmp
    path.mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("TRAINCTL_HOME", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


INTERFACE = [name for name, _ in inspect.getmembers(Realizer, inspect.isfunction) if not name.startswith("_")]


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_every_provider_module_implements_the_whole_interface(provider: str) -> None:
    module = importlib.import_module(PROVIDERS[provider])
    for name in INTERFACE:
        assert callable(getattr(module, name, None)), f"{PROVIDERS[provider]} lacks {name}()"
        wanted = [p for p in inspect.signature(getattr(Realizer, name)).parameters.values() if p.name != "self"]
        have = list(inspect.signature(getattr(module, name)).parameters.values())
        assert [(p.name, p.kind) for p in have] == [(p.name, p.kind) for p in wanted], \
            f"{PROVIDERS[provider]}.{name}{inspect.signature(getattr(module, name))}"


# `x.provider == "gcp"`, `cluster.kind != "gke"`, `inventory.target in ("ssh", ...)`: a caller
# deciding by which provider, kind of stack or way in it has, instead of asking Capabilities.
BRANCH = re.compile(r"\b(provider|kind|target)\s*(?:[!=]=|(?:not\s+)?in)\s*[(\[{]?\s*[\"'](local|gcp|vm|tpu|gke|ssh)[\"']")
# `.kind` also names what a node computes with (cpu, gpu, tpu): the node's hardware, told by the
# inventory, not a provider's branch.
HARDWARE = re.compile(r"accelerator\.kind\b")


def test_callers_never_branch_on_the_provider() -> None:
    found = [f"{path.relative_to(REPO_ROOT)}:{i}: {line.strip()}"
             for top in ("trainctl", "bootstrap") for path in sorted((REPO_ROOT / top).rglob("*.py"))
             for i, line in enumerate(path.read_text().splitlines(), 1)
             if BRANCH.search(HARDWARE.sub("", line))]
    assert found == []


def test_the_branch_check_finds_provider_kind_and_target_branches() -> None:
    caught = ['if spec.provider == "local":', 'x = a if cluster.kind != "gke" else b',
              'if inventory.target in ("gke",):', 'if spec.kind not in {"vm"}:', "if provider=='gcp':"]
    passed = ['if node.accelerator.kind == "gpu":', 'kind = r.type', 'if item == "target":',
              'elif kind == "CATEGORICAL":', 'if e.kind != "d":']
    assert all(BRANCH.search(HARDWARE.sub("", line)) for line in caught)
    assert not any(BRANCH.search(HARDWARE.sub("", line)) for line in passed)


def test_the_recorded_provider_picks_the_realizer_not_the_files_present(home: Path) -> None:
    record_provider("made-on-gcp", "gcp")
    assert realizers.provider_of("made-on-gcp") == "gcp"
    assert realizers.for_stack("made-on-gcp") is importlib.import_module("infra.providers.gcp.realizer")
    assert realizers.provider_of("gpu-t4x2") == "gcp"  # no state here: its stack file says so
    assert realizers.provider_of("some-ephemeral-run") == "local"  # unknown: down is a no-op


def test_an_unknown_provider_is_a_user_error() -> None:
    with pytest.raises(ConfigError, match="unknown provider 'aws'; known: gcp, local"):
        realizers.realizer("aws")


def test_live_lists_every_providers_stacks_with_cost_and_flags_broken_state(home: Path) -> None:
    hour_ago = time.time() - 3600
    gcp_spec = ClusterSpec.model_validate({"name": "g1", "provider": "gcp", "project": "p", "zone": "us-central1-a",
                                           "machine_type": "n1-standard-8", "nodes": 2,
                                           "ssh": {"source_ranges": ["203.0.113.7/32"]}})
    record_provider("g1", "gcp")
    (state_dir("g1") / "gcp.json").write_text(json.dumps(
        {"created_at": hour_ago, "expires_at": None, "spec": gcp_spec.model_dump(mode="json")}))
    record_provider("l1", "local")
    (state_dir("l1") / "state.json").write_text(json.dumps(
        {"stack": "l1", "created_at": hour_ago, "spec": {"name": "l1"}, "resources": []}))
    record_provider("l2", "local")
    (state_dir("l2") / "state.json").write_text("{truncated")

    rows = {r.stack: r for r in realizers.live()}

    assert set(rows) == {"g1", "l1", "l2"}
    assert rows["g1"].provider == "gcp" and rows["g1"].nodes == 2
    assert rows["g1"].cost_so_far == pytest.approx(realizers.for_spec(gcp_spec).estimate(gcp_spec).per_hour, rel=0.01)
    assert rows["l1"].provider == "local" and rows["l1"].cost_so_far == 0.0
    assert rows["l1"].ttl_left_h == pytest.approx(ClusterSpec(name="l1").ttl_hours - 1, abs=0.01)
    assert rows["l2"].broken and not rows["l1"].broken


def test_gcp_repair_of_a_gke_stack_says_its_node_pool_does_it(trainctl_home) -> None:
    with pytest.raises(ConfigError, match="`repair` is not available on gcp stacks: a GKE stack's node pool"):
        realizers.realizer("gcp").repair("gke-l4", ["n0"], lambda _l: None)


def test_local_repair_of_a_stack_that_is_not_up_names_it(trainctl_home) -> None:
    with pytest.raises(ConfigError, match="stack 's' is not up"):
        realizers.realizer("local").repair("s", ["n0"], lambda _l: None)


def test_preempting_a_gcp_node_says_why_not(trainctl_home, monkeypatch) -> None:
    from infra.providers.gcp import private_endpoints

    monkeypatch.setattr(private_endpoints, "_in_use", None)  # Google itself, not a simulator
    with pytest.raises(ConfigError, match="`preempt` is not available on gcp stacks: Google reclaims"):
        realizers.for_stack("gpu-l4-spot").preempt("gpu-l4-spot", "n0", grace=1, progress=lambda _m: None)
