"""The policy pack as the Pulumi engine runs it (`pulumi up --policy-pack policy`): one mandatory,
documented policy per rule, violations reported through the engine's callback against the
violating resource, __main__.py serving the whole pack, in the repository's virtualenv."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

import policy
from policy import pack
from policy.declared import T_CLUSTER, T_FIREWALL, T_NODEPOOL
from policy.rules import RULES, RULES_BY_NAME
from tests.unit.policy.engine_calls import engine_options, engine_policies

REPO = Path(__file__).resolve().parents[3]


def test_rules_are_mandatory_documented_and_uniquely_named() -> None:
    assert len({r.name for r in RULES}) == len(RULES) >= 11
    for r in RULES:
        assert r.enforcement == "mandatory" and r.description
        assert r.url.startswith("https://cloud.google.com/"), r.url
        assert (r.check is None) != (r.stack_check is None)


def _resource_policy(name: str) -> ResourceValidationPolicy:
    p = engine_policies()[name]
    assert isinstance(p, ResourceValidationPolicy)
    return p


def _stack_policy(name: str) -> StackValidationPolicy:
    p = engine_policies()[name]
    assert isinstance(p, StackValidationPolicy)
    return p


def test_pack_has_one_mandatory_policy_per_rule_with_its_url() -> None:
    policies = engine_policies()
    assert set(policies) == {r.name for r in RULES}
    for r in RULES:
        p = policies[r.name]
        assert p.enforcement_level == EnforcementLevel.MANDATORY and p.url == r.url
        assert isinstance(p, StackValidationPolicy if r.stack_check else ResourceValidationPolicy)


def test_resource_policies_report_through_the_engine_callback() -> None:
    reported: list[tuple[str, str | None]] = []
    args = ResourceValidationArgs(
        T_FIREWALL, {"name": "s-fw-ssh", "sourceRanges": ["0.0.0.0/0"],
                     "allows": [{"protocol": "tcp", "ports": ["22"]}]},
        "urn:pulumi:s::trainctl::gcp:compute/firewall:Firewall::fw", "fw", engine_options(), None)
    _resource_policy("firewall-no-public-ssh").validate(args, lambda m, urn: reported.append((m, urn)))
    ((message, _),) = reported
    assert "0.0.0.0/0" in message and RULES_BY_NAME["firewall-no-public-ssh"].url in message


def test_stack_policies_report_against_the_violating_resource() -> None:
    def res(typ: str, name: str, props: dict) -> PolicyResource:
        return PolicyResource(typ, props, f"urn:pulumi:s::trainctl::{typ}::{name}", name, engine_options(),
                              None, None, [], {})
    stack = StackValidationArgs([
        res(T_CLUSTER, "c", {"name": "s-gke", "releaseChannel": {"channel": "REGULAR"}}),
        res(T_NODEPOOL, "p", {"name": "s-pool", "cluster": "s-gke", "management": {"autoUpgrade": False}}),
    ])
    reported: list[tuple[str, str | None]] = []
    _stack_policy("gke-release-channel-auto-upgrade").validate(
        stack, lambda m, urn: reported.append((m, urn)))
    ((message, urn),) = reported
    assert urn and urn.endswith("::p") and "auto_upgrade=True" in message


def test_main_serves_a_mandatory_pack_of_all_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    import pulumi_policy

    built: dict[str, Any] = {}

    def fake_pack(name: str, policies: list, **kwargs: Any) -> None:  # the real one serves forever
        built.update(name=name, policies=policies, **kwargs)

    monkeypatch.setattr(pulumi_policy, "PolicyPack", fake_pack)
    runpy.run_path(str(Path(policy.PACK_DIR) / "__main__.py"), run_name="__main__")
    assert built["name"] == pack.PACK_NAME
    assert built["enforcement_level"] == EnforcementLevel.MANDATORY
    assert {p.name for p in built["policies"]} == {r.name for r in RULES}


def test_pack_project_file_runs_in_the_repo_virtualenv() -> None:
    import yaml

    project = yaml.safe_load((Path(policy.PACK_DIR) / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    venv = (Path(policy.PACK_DIR) / project["runtime"]["options"]["virtualenv"]).resolve()
    assert venv == (REPO / ".venv").resolve()
    assert Path(policy.PACK_DIR).is_absolute() and Path(policy.PACK_DIR) == REPO / "policy"
