"""The rules of policy.rules as pulumi_policy policies: what the Pulumi engine runs.

Kept apart from __main__.py because pulumi_policy.PolicyPack() starts the analyzer's gRPC
server and never returns; the tests drive these policies' validate callbacks directly.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policy.declared import Resource
from policy.rules import RULES, Rule

PACK_NAME = "trainctl-gcp"


def _resource(resource_type: str, name: str, props: Any, opts: Any) -> Resource:
    # The engine shows `protect` but not retainOnDelete (see storage_rules.RETAIN_LABEL).
    protect = getattr(opts, "protect", None)
    return Resource(resource_type, name, dict(props or {}),
                    {"protect": protect} if protect is not None else {})


def _resource_validator(rule: Rule):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        resource = _resource(args.resource_type, args.name, args.props, args.opts)
        for violation in rule.run([resource]):
            report_violation(f"{violation.message} (see {violation.url})", None)
    return validate


def _stack_validator(rule: Rule):
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [_resource(r.resource_type, r.name, r.props, r.opts) for r in args.resources]
        urns = {r.name: r.urn for r in args.resources}
        for violation in rule.run(resources):
            report_violation(f"{violation.message} (see {violation.url})", urns.get(violation.resource))
    return validate


def policies() -> list[Policy]:
    out: list[Policy] = []
    for rule in RULES:
        common: dict[str, Any] = dict(name=rule.name, description=rule.description,
                                      enforcement_level=EnforcementLevel.MANDATORY, url=rule.url)
        if rule.check is not None:
            out.append(ResourceValidationPolicy(validate=_resource_validator(rule), **common))
        if rule.stack_check is not None:
            out.append(StackValidationPolicy(validate=_stack_validator(rule), **common))
    return out
