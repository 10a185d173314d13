"""Every GCP stack trainctl ships passes every rule of the policy pack: over its resources as the
program declares them under mocks, and as the Pulumi engine hands them to the pack's policies."""

from __future__ import annotations

import pytest
from pulumi_policy import (
    PolicyResource,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policy.declared import Resource
from policy.rules import RULES, RULES_BY_NAME
from tests.unit.policy.engine_calls import engine_options, engine_policies
from tests.unit.providers.gcp.test_gcp_program import GCP_STACKS, evaluated_stack


def stack_resources(stack: str) -> list[Resource]:
    _, ev = evaluated_stack(stack)  # shares test_gcp_program's cache: each stack evaluated once
    return [Resource(r.type, r.name, r.inputs, getattr(r, "options", None) or {}) for r in ev.resources]


@pytest.mark.parametrize("rule", [r.name for r in RULES])
@pytest.mark.parametrize("stack", GCP_STACKS)
def test_every_gcp_stack_passes_every_rule(stack: str, rule: str) -> None:
    violations = RULES_BY_NAME[rule].run(stack_resources(stack))
    assert not violations, "\n".join(map(str, violations))


@pytest.mark.parametrize("stack", GCP_STACKS)
def test_pack_passes_every_stack_as_the_engine_would_see_it(stack: str) -> None:
    resources = stack_resources(stack)
    reported: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        reported.append(message)

    options = engine_options()
    for p in engine_policies().values():
        if isinstance(p, StackValidationPolicy):
            p.validate(StackValidationArgs([
                PolicyResource(r.type, dict(r.props), f"urn:{r.name}", r.name, options, None, None, [], {})
                for r in resources]), report)
        else:
            assert isinstance(p, ResourceValidationPolicy)
            for r in resources:
                p.validate(ResourceValidationArgs(r.type, dict(r.props), f"urn:{r.name}", r.name, options, None),
                           report)
    assert not reported, "\n".join(reported)
