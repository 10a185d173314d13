"""The flex-start-time-limited rule: a hand-written FLEX_START VM (or flex-start GKE node pool)
that GCE would refuse -- no or too long a max run duration, no termination action, automatic
restart, a machine family without flex-start -- is refused by
the policy pack `pulumi up` and `trainctl plan` run; what trainctl's program declares passes."""

from __future__ import annotations

from typing import Any

import pytest

from infra.providers.gcp.program.mocks import evaluate
from infra.spec.cluster import ClusterSpec
from policy.declared import T_INSTANCE, T_NODEPOOL, Resource
from policy.rules import RULES_BY_NAME, check_resources

RULE = "flex-start-time-limited"
GOOD = {"provisioningModel": "FLEX_START", "automaticRestart": False, "onHostMaintenance": "TERMINATE",
        "instanceTerminationAction": "DELETE", "maxRunDuration": {"seconds": 3600}}


def messages(resource: Resource) -> list[str]:
    return [v.message for v in RULES_BY_NAME[RULE].run([resource])]


def vm(machine: str = "g2-standard-8", **scheduling: Any) -> Resource:
    return Resource(T_INSTANCE, "vm", {"name": "vm-0", "machineType": machine, "scheduling": {**GOOD, **scheduling}})


@pytest.mark.parametrize(("change", "says"), [
    ({"maxRunDuration": None}, "set scheduling.max_run_duration, at most 7 days (604800s); it is unset"),
    ({"maxRunDuration": {"seconds": 604801}}, "at most 7 days (604800s); it is 604801"),
    ({"instanceTerminationAction": None}, "set instance_termination_action"),
    ({"automaticRestart": True}, "set automatic_restart=False"),
])
def test_a_flex_start_vm_gce_would_refuse_is_refused(change: dict[str, Any], says: str) -> None:
    (message,) = messages(vm(**change))
    assert message.startswith("flex-start VM 'vm-0'") and says in message


def test_a_machine_family_without_flex_start_is_refused() -> None:
    (message,) = messages(vm("n1-standard-8"))
    assert "is n1-standard-8; GCE offers flex-start on the a2, a3, a4, g2, h4d machine families" in message


def test_flex_start_gke_node_pools_are_not_spot_and_run_at_most_seven_days() -> None:
    config = {"machineType": "g2-standard-8", "flexStart": True, "spot": True, "maxRunDuration": "700000s"}
    found = messages(Resource(T_NODEPOOL, "p", {"name": "s-pool", "nodeConfig": config}))
    assert len(found) == 2 and "is also spot" in found[0] and "over 7 days" in found[1]
    assert not messages(Resource(T_NODEPOOL, "p", {"name": "s-pool", "nodeConfig": {
        **config, "spot": False, "maxRunDuration": "3600s"}}))


def test_what_trainctl_declares_for_a_flex_start_stack_passes_every_rule() -> None:
    spec = ClusterSpec.model_validate({
        "name": "f", "provider": "gcp", "project": "my-project", "zone": "us-central1-a", "nodes": 2,
        "machine_type": "g2-standard-8", "provisioning": "flex-start", "ttl_hours": 12,
        "ssh": {"source_ranges": ["203.0.113.7/32"]}})
    declared = evaluate(spec).resources
    vms = [r for r in declared if r.type == T_INSTANCE]
    assert len(vms) == 2 and vms[0].inputs["scheduling"]["maxRunDuration"] == {"seconds": 12 * 3600}
    assert not check_resources([Resource(r.type, r.name, r.inputs) for r in declared])
