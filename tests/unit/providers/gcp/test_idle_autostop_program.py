"""A GCP VM stack with idle_minutes, as the Pulumi program declares it (Pulumi's mocks): node 0
alone carries the idle watch (startup script and settings); the nodes' account gets one custom
role, able to read and relabel VMs and nothing else, granted under a condition that names this
stack's VMs; the policy pack passes it. Without idle_minutes none of it is declared."""

from __future__ import annotations

import json
import subprocess

from infra.providers.gcp import realizer
from infra.providers.gcp.program.cluster import service_account_id
from infra.providers.gcp.program.idle_autostop import CONFIG_ATTRIBUTE, IDLE_WATCH_PERMISSIONS, idle_role_id
from infra.providers.gcp.program.mocks import evaluate
from infra.spec.stack_config import load_stack
from policy.declared import Resource
from policy.rules import check_resources
from tests.unit.providers.gcp.test_gcp_program import evaluated_stack

PUBKEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMOCKKEY"


def test_node_0_watches_and_may_only_relabel_its_own_stacks_vms():
    spec = load_stack("gpu-t4x2", overrides={"idle_minutes": 30})
    ev = evaluate(spec, PUBKEY)
    instances = {i.inputs["name"]: i.inputs for i in ev.of_type("compute/instance:Instance")}
    watcher = instances[f"{spec.name}-node-0"]["metadata"]
    config = json.loads(watcher[CONFIG_ATTRIBUTE])
    assert config["idle_seconds"] == 30 * 60 and config["instances"] == sorted(instances)
    assert "node_idle_watch" in watcher["startup-script"] and "IdleWindow" in watcher["startup-script"]
    syntax = subprocess.run(["bash", "-n"], input=watcher["startup-script"], text=True, capture_output=True)
    assert syntax.returncode == 0, syntax.stderr
    assert all(CONFIG_ATTRIBUTE not in i["metadata"] and "startup-script" not in i["metadata"]
               for name, i in instances.items() if name != f"{spec.name}-node-0")

    (role,) = [r.inputs for r in ev.of_type("IAMCustomRole") if r.inputs["roleId"] == idle_role_id(spec)]
    assert sorted(role["permissions"]) == sorted(IDLE_WATCH_PERMISSIONS)
    (grant,) = [r.inputs for r in ev.of_type("projects/iAMMember:IAMMember")
                if r.inputs["role"] == f"projects/{spec.project}/roles/{idle_role_id(spec)}"]
    assert grant["member"].startswith(f"serviceAccount:{service_account_id(spec)}@")
    expression = grant["condition"]["expression"]
    assert expression.startswith('resource.type == "compute.googleapis.com/Instance" && (')
    for name in instances:
        assert f'resource.name == "projects/{spec.project}/zones/{spec.zone}/instances/{name}"' in expression
    assert expression.count("resource.name ==") == len(instances)

    declared = [Resource(d.type, d.name, d.inputs) for d in ev.resources]
    assert check_resources(declared) == []


def test_plan_shows_the_idle_watchs_role_and_grant():
    spec = load_stack("gpu-t4x2", overrides={"idle_minutes": 30})
    rows = {row.name: row for row in realizer.plan(spec)}
    assert sorted(rows[f"{spec.name}-idle-watch-role"].values["permissions"]) == sorted(IDLE_WATCH_PERMISSIONS)
    assert rows[f"{spec.name}-idle-watch-grant"].values["role"] == f"projects/{spec.project}/roles/{idle_role_id(spec)}"


def test_a_stack_without_idle_minutes_declares_no_watch_and_no_grant():
    _, ev = evaluated_stack("gpu-t4x2")  # test_gcp_program's, evaluated once
    assert not [r for r in ev.of_type("IAMCustomRole") if "IdleWatch" in r.inputs["roleId"]]
    assert all("startup-script" not in i.inputs["metadata"] for i in ev.of_type("compute/instance:Instance"))
