"""The policy pack (policy/): GCP's documented constraints as rules, run over every GCP stack's
mocked resources, each rule shown to fire on a deliberately bad resource, the pulumi_policy
wiring driven as the engine drives it, and `trainctl plan` refusing a violating stack."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

import policy
from policy import pack, rules
from policy.rules import RULES, RULES_BY_NAME, Resource, check_resources
from tests.unit.providers.gcp.test_gcp_program import GCP_STACKS, evaluated_stack

REPO = Path(__file__).resolve().parents[3]


def declared(stack: str) -> list[Resource]:
    _, ev = evaluated_stack(stack)  # shares test_gcp_program's cache: each stack evaluated once
    return [Resource(r.type, r.name, r.inputs, getattr(r, "options", None) or {}) for r in ev.resources]


# --- every stack passes every rule --------------------------------------------------------

@pytest.mark.parametrize("rule", [r.name for r in RULES])
@pytest.mark.parametrize("stack", GCP_STACKS)
def test_every_gcp_stack_passes_every_rule(stack: str, rule: str) -> None:
    violations = RULES_BY_NAME[rule].run(declared(stack))
    assert not violations, "\n".join(map(str, violations))


def test_rules_are_mandatory_documented_and_uniquely_named() -> None:
    assert len({r.name for r in RULES}) == len(RULES) >= 11
    for r in RULES:
        assert r.enforcement == "mandatory" and r.description
        assert r.url.startswith("https://cloud.google.com/"), r.url
        assert (r.check is None) != (r.stack_check is None)


# --- each rule fires on a bad resource ----------------------------------------------------

TRAINCTL = {"managed-by": "trainctl", "trainctl-stack": "s"}


def fired(rule: str, *resources: Resource) -> list[rules.Violation]:
    out = RULES_BY_NAME[rule].run(list(resources))
    for v in out:
        assert v.rule == rule and v.url == RULES_BY_NAME[rule].url and v.url in str(v)
    return out


def instance(**props: Any) -> Resource:
    return Resource(rules.T_INSTANCE, "vm", {"name": "vm-0", "machineType": "n1-standard-8", **props})


def test_release_channel_requires_node_pool_auto_upgrade() -> None:
    cluster = Resource(rules.T_CLUSTER, "c", {"name": "s-gke", "releaseChannel": {"channel": "REGULAR"}})
    pool = Resource(rules.T_NODEPOOL, "p", {"name": "s-pool", "cluster": "s-gke",
                                            "management": {"autoRepair": True, "autoUpgrade": False}})
    (v,) = fired("gke-release-channel-auto-upgrade", cluster, pool)
    assert v.resource == "p" and "auto_upgrade=True" in v.message and "REGULAR" in v.message
    # By id too, and fine when upgrading or when the cluster has no channel.
    by_id = Resource(rules.T_NODEPOOL, "p", {**pool.props, "cluster": "projects/x/locations/z/clusters/s-gke"})
    assert fired("gke-release-channel-auto-upgrade", cluster, by_id)
    ok = Resource(rules.T_NODEPOOL, "p", {**pool.props, "management": {"autoUpgrade": True}})
    assert not fired("gke-release-channel-auto-upgrade", cluster, ok)
    no_channel = Resource(rules.T_CLUSTER, "c", {"name": "s-gke"})
    assert not fired("gke-release-channel-auto-upgrade", no_channel, pool)


def test_trainctl_clusters_must_be_deletable() -> None:
    for props in ({"deletionProtection": True}, {}):  # unset defaults to true in pulumi-gcp
        (v,) = fired("gke-cluster-deletable",
                     Resource(rules.T_CLUSTER, "c", {"name": "s-gke", "resourceLabels": TRAINCTL, **props}))
        assert "deletion_protection=False" in v.message
    assert not fired("gke-cluster-deletable", Resource(rules.T_CLUSTER, "c", {
        "name": "s-gke", "resourceLabels": TRAINCTL, "deletionProtection": False}))


def test_gke_names_over_40_characters_are_refused_as_gke_refuses_them() -> None:
    long = "x" * 41
    (v,) = fired("gke-name-length", Resource(rules.T_CLUSTER, "c", {"name": long}))
    assert "41 characters" in v.message
    assert fired("gke-name-length", Resource(rules.T_NODEPOOL, "p", {"name": long}))
    assert not fired("gke-name-length", Resource(rules.T_NODEPOOL, "p", {"name": "x" * 40}))


def test_multi_host_tpu_pool_holds_exactly_one_slice() -> None:
    def pool(count: float, topology: str = "4x4") -> Resource:
        return Resource(rules.T_NODEPOOL, "p", {
            "name": "s-pool", "nodeCount": count, "nodeConfig": {"machineType": "ct5lp-hightpu-4t"},
            "placementPolicy": {"type": "COMPACT", "tpuTopology": topology}})
    (v,) = fired("gke-tpu-multihost-node-count", pool(8.0))
    assert "8 node(s)" in v.message and "node_count=4" in v.message
    assert not fired("gke-tpu-multihost-node-count", pool(4.0))
    assert rules.tpu_topology_hosts("ct5lp-hightpu-4t", "4x8") == 8
    assert rules.tpu_topology_hosts("ct4p-hightpu-4t", "2x2x4") == 4


def test_trainctl_buckets_are_removable_or_kept_on_purpose() -> None:
    bucket = {"name": "b-trainctl", "labels": TRAINCTL, "forceDestroy": False}
    (v,) = fired("bucket-removable", Resource(rules.T_BUCKET, "b", bucket))
    assert "force_destroy=True" in v.message and "retain_on_delete" in v.message
    assert not fired("bucket-removable", Resource(rules.T_BUCKET, "b", {**bucket, "forceDestroy": True}))
    kept = {**bucket, "labels": {**TRAINCTL, rules.RETAIN_LABEL: "true"}}
    assert not fired("bucket-removable", Resource(rules.T_BUCKET, "b", kept))
    assert not fired("bucket-removable", Resource(rules.T_BUCKET, "b", bucket, {"retainOnDelete": True}))


@pytest.mark.parametrize("name", ["My_Bucket", "ab", "x" * 64, "-starts-with-dash", "goog-ckpt",
                                  "my-google-bucket", "my-g00gle-bucket", "192.168.5.4", "a..b"])
def test_bucket_names_follow_cloud_storage_rules(name: str) -> None:
    (v,) = fired("bucket-name", Resource(rules.T_BUCKET, "b", {"name": name}))[:1]
    assert name in v.message


@pytest.mark.parametrize("name", ["my-project-gpu-t4x2-trainctl", "a_b.c-d", "abc", "x" * 63])
def test_valid_bucket_names_pass(name: str) -> None:
    assert not fired("bucket-name", Resource(rules.T_BUCKET, "b", {"name": name}))


def test_gpu_vms_terminate_on_host_maintenance() -> None:
    gpus = [{"type": "nvidia-tesla-t4", "count": 1.0}]
    (v,) = fired("gpu-vm-terminate-on-maintenance",
                 instance(guestAccelerators=gpus, scheduling={"onHostMaintenance": "MIGRATE"}))
    assert "TERMINATE" in v.message
    assert fired("gpu-vm-terminate-on-maintenance", instance(machineType="a2-highgpu-1g"))  # bundled
    assert not fired("gpu-vm-terminate-on-maintenance",
                     instance(guestAccelerators=gpus, scheduling={"onHostMaintenance": "TERMINATE"}))
    assert not fired("gpu-vm-terminate-on-maintenance", instance())  # no GPU: MIGRATE is fine


def test_bundled_gpu_machine_types_declare_no_guest_accelerators() -> None:
    (v,) = fired("bundled-gpu-machine-no-guest-accelerators",
                 instance(machineType="g2-standard-8", guestAccelerators=[]))
    assert "leave guest_accelerators out" in v.message
    assert not fired("bundled-gpu-machine-no-guest-accelerators", instance(machineType="g2-standard-8"))


def test_spot_scheduling_is_consistent() -> None:
    bad = instance(scheduling={"provisioningModel": "SPOT", "automaticRestart": True})
    messages = " ".join(v.message for v in fired("spot-scheduling-consistent", bad))
    assert "preemptible=True" in messages and "automatic_restart=False" in messages
    assert "instance_termination_action" in messages
    good = instance(scheduling={"provisioningModel": "SPOT", "preemptible": True, "automaticRestart": False,
                                "onHostMaintenance": "TERMINATE", "instanceTerminationAction": "DELETE"})
    assert not fired("spot-scheduling-consistent", good)
    standard = instance(scheduling={"provisioningModel": "STANDARD", "instanceTerminationAction": "STOP"})
    (v,) = fired("spot-scheduling-consistent", standard)
    assert "remove it" in v.message


@pytest.mark.parametrize("allow", [{"protocol": "tcp", "ports": ["22"]}, {"protocol": "tcp"},
                                   {"protocol": "all"}, {"protocol": "tcp", "ports": ["20-30"]}])
@pytest.mark.parametrize("anywhere", ["0.0.0.0/0", "::/0"])
def test_firewalls_never_open_ssh_to_the_internet(allow: dict, anywhere: str) -> None:
    fw = Resource(rules.T_FIREWALL, "fw", {"name": "s-fw-ssh", "direction": "INGRESS",
                                           "sourceRanges": ["203.0.113.0/24", anywhere], "allows": [allow]})
    (v,) = fired("firewall-no-public-ssh", fw)
    assert anywhere in v.message and "source_ranges" in v.message


def test_firewalls_to_own_ranges_or_other_ports_pass() -> None:
    for props in ({"sourceRanges": ["203.0.113.0/24"], "allows": [{"protocol": "tcp", "ports": ["22"]}]},
                  {"sourceRanges": ["0.0.0.0/0"], "allows": [{"protocol": "tcp", "ports": ["443"]}]},
                  {"sourceRanges": ["0.0.0.0/0"], "allows": [{"protocol": "icmp"}]}):
        assert not fired("firewall-no-public-ssh", Resource(rules.T_FIREWALL, "fw", props))


def test_ssh_keys_metadata_needs_os_login_off() -> None:
    meta = {"ssh-keys": "u:ssh-ed25519 AAAA u", "block-project-ssh-keys": "TRUE"}
    for typ in (rules.T_INSTANCE, rules.T_TPU_VM):
        (v,) = fired("ssh-keys-need-oslogin-off", Resource(typ, "n", {"name": "n", "metadata": meta}))
        assert "enable-oslogin='FALSE'" in v.message
        ok = {"name": "n", "metadata": {**meta, "enable-oslogin": "FALSE"}}
        assert not fired("ssh-keys-need-oslogin-off", Resource(typ, "n", ok))


def test_labels_follow_gcp_rules() -> None:
    for labels in ({"Team": "ml"}, {"team": "ML"}, {"1team": "x"}, {"team": "a" * 64},
                   {"team": "a.b"}, {f"k{i}": "v" for i in range(65)}):
        assert fired("labels-valid", Resource(rules.T_BUCKET, "b", {"labels": labels})), labels
    assert fired("labels-valid", Resource(rules.T_NODEPOOL, "p", {"nodeConfig": {"resourceLabels": {"A": "b"}}}))
    # Kubernetes node labels on a pool follow Kubernetes' rules, not GCP's.
    assert not fired("labels-valid", Resource(rules.T_NODEPOOL, "p", {"nodeConfig": {"labels": {"A.b/c": "D"}}}))
    assert not fired("labels-valid", Resource(rules.T_INSTANCE, "i", {"labels": {
        **TRAINCTL, "trainctl-expires": "1900000000", "empty": ""}}))


def test_second_gen_functions_are_invoked_with_run_invoker() -> None:
    member = {"cloudFunction": "s-reaper", "role": "roles/cloudfunctions.invoker", "member": "serviceAccount:x"}
    (v,) = fired("function-v2-run-invoker", Resource(rules.FUNCTION_V2_IAM[0], "inv", member))
    assert "roles/run.invoker" in v.message
    assert not fired("function-v2-run-invoker",
                     Resource(rules.FUNCTION_V2_IAM[0], "inv", {**member, "role": "roles/cloudfunctions.viewer"}))


def test_enabled_apis_stay_enabled_on_destroy() -> None:
    svc = {"service": "container.googleapis.com", "project": "p"}
    assert fired("api-service-not-disabled-on-destroy", Resource(rules.T_SERVICE, "api", svc))
    assert not fired("api-service-not-disabled-on-destroy",
                     Resource(rules.T_SERVICE, "api", {**svc, "disableOnDestroy": False}))


@pytest.mark.parametrize("rid, ok", [("s-images", True), ("a", True), ("1abc", False), ("abc-", False),
                                     ("Abc", False), ("a_b", False), ("a" * 63, True), ("a" * 64, False)])
def test_artifact_registry_repository_ids_follow_its_rules(rid: str, ok: bool) -> None:
    repo = Resource(rules.T_AR_REPOSITORY, "r", {"repositoryId": rid, "format": "DOCKER"})
    assert bool(fired("artifact-registry-repository-id", repo)) is not ok


def test_image_repositories_are_never_public() -> None:
    grant = {"repository": "s-images", "role": "roles/artifactregistry.reader", "member": "allUsers"}
    (v,) = fired("artifact-registry-not-public", Resource(rules.AR_IAM[0], "g", grant))
    assert "allUsers" in v.message
    assert not fired("artifact-registry-not-public",
                     Resource(rules.AR_IAM[0], "g", {**grant, "member": "serviceAccount:s-sa@p.iam.gserviceaccount.com"}))
    assert fired("artifact-registry-not-public",
                 Resource(rules.AR_IAM[1], "g", {"role": "roles/artifactregistry.reader",
                                                 "members": ["serviceAccount:x", "allAuthenticatedUsers"]}))


def test_list_rules_fire_on_the_read_only_lists_the_policy_engine_hands_over() -> None:
    """Under `pulumi up --policy-pack`, pulumi_policy wraps a resource's properties in proxies
    whose lists are Sequences, not lists; the list-reading rules must still see them."""
    from pulumi_policy.proxy import unknown_checking_proxy

    props = {"direction": "INGRESS", "sourceRanges": ["0.0.0.0/0"],
             "allows": [{"protocol": "tcp", "ports": ["22"]}]}
    proxied = unknown_checking_proxy(props)
    assert not isinstance(proxied["sourceRanges"], list)
    assert fired("firewall-no-public-ssh", Resource(rules.T_FIREWALL, "fw", proxied))


def test_every_rule_has_a_firing_test() -> None:
    text = Path(__file__).read_text()
    missing = [r.name for r in RULES if f'"{r.name}"' not in text.split("def test_every_rule_has")[0]]
    assert not missing


# --- the pulumi_policy wiring, driven as the engine drives it -----------------------------

def _opts() -> PolicyResourceOptions:
    # What the engine passes when a resource sets no options (it gives no retainOnDelete at all).
    return PolicyResourceOptions(protect=False, ignore_changes=[], delete_before_replace=None, aliases=[],
                                 custom_timeouts=PolicyCustomTimeouts(0, 0, 0), additional_secret_outputs=[],
                                 parent=None)


def _engine_policies() -> dict[str, Policy]:
    return {p.name: p for p in pack.policies()}


def _resource_policy(name: str) -> ResourceValidationPolicy:
    p = _engine_policies()[name]
    assert isinstance(p, ResourceValidationPolicy)
    return p


def _stack_policy(name: str) -> StackValidationPolicy:
    p = _engine_policies()[name]
    assert isinstance(p, StackValidationPolicy)
    return p


def test_pack_has_one_mandatory_policy_per_rule_with_its_url() -> None:
    policies = _engine_policies()
    assert set(policies) == {r.name for r in RULES}
    for r in RULES:
        p = policies[r.name]
        assert p.enforcement_level == EnforcementLevel.MANDATORY and p.url == r.url
        assert isinstance(p, StackValidationPolicy if r.stack_check else ResourceValidationPolicy)


def test_resource_policies_report_through_the_engine_callback() -> None:
    reported: list[tuple[str, str | None]] = []
    args = ResourceValidationArgs(
        rules.T_FIREWALL, {"name": "s-fw-ssh", "sourceRanges": ["0.0.0.0/0"],
                           "allows": [{"protocol": "tcp", "ports": ["22"]}]},
        "urn:pulumi:s::trainctl::gcp:compute/firewall:Firewall::fw", "fw", _opts(), None)
    _resource_policy("firewall-no-public-ssh").validate(args, lambda m, urn: reported.append((m, urn)))
    ((message, _),) = reported
    assert "0.0.0.0/0" in message and RULES_BY_NAME["firewall-no-public-ssh"].url in message


def test_stack_policies_report_against_the_violating_resource() -> None:
    def res(typ: str, name: str, props: dict) -> PolicyResource:
        return PolicyResource(typ, props, f"urn:pulumi:s::trainctl::{typ}::{name}", name, _opts(),
                              None, None, [], {})
    stack = StackValidationArgs([
        res(rules.T_CLUSTER, "c", {"name": "s-gke", "releaseChannel": {"channel": "REGULAR"}}),
        res(rules.T_NODEPOOL, "p", {"name": "s-pool", "cluster": "s-gke", "management": {"autoUpgrade": False}}),
    ])
    reported: list[tuple[str, str | None]] = []
    _stack_policy("gke-release-channel-auto-upgrade").validate(
        stack, lambda m, urn: reported.append((m, urn)))
    ((message, urn),) = reported
    assert urn and urn.endswith("::p") and "auto_upgrade=True" in message


@pytest.mark.parametrize("stack", GCP_STACKS)
def test_pack_passes_every_stack_as_the_engine_would_see_it(stack: str) -> None:
    resources = declared(stack)
    reported: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        reported.append(message)

    for p in _engine_policies().values():
        if isinstance(p, StackValidationPolicy):
            p.validate(StackValidationArgs([
                PolicyResource(r.type, dict(r.props), f"urn:{r.name}", r.name, _opts(), None, None, [], {})
                for r in resources]), report)
        else:
            assert isinstance(p, ResourceValidationPolicy)
            for r in resources:
                p.validate(ResourceValidationArgs(r.type, dict(r.props), f"urn:{r.name}", r.name, _opts(), None),
                           report)
    assert not reported, "\n".join(reported)


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


# --- `trainctl plan` refuses a violating stack, before anything is created ----------------

def test_plan_refuses_a_violating_stack_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import infra.providers.gcp.program.mocks as mocks
    from infra.spec.stack_config import ConfigError, load_stack
    from infra.providers.gcp import realizer as gcp_realizer

    real = mocks.evaluate

    def with_public_ssh(spec, *a: Any, **kw: Any):
        ev = real(spec, *a, **kw)
        ev.resources.append(mocks.Declared(rules.T_FIREWALL, "open-ssh", {
            "name": "open-ssh", "sourceRanges": ["0.0.0.0/0"], "allows": [{"protocol": "tcp", "ports": ["22"]}]}))
        return ev

    monkeypatch.setattr(mocks, "evaluate", with_public_ssh)
    with pytest.raises(ConfigError) as err:
        gcp_realizer.plan(load_stack("gpu-t4x2"))
    assert "[firewall-no-public-ssh] open-ssh" in str(err.value)
    assert RULES_BY_NAME["firewall-no-public-ssh"].url in str(err.value)


SITECUSTOMIZE = '''
# Test hook: the program declares one more resource, a firewall open to the internet on :22.
import infra.providers.gcp.program.mocks as _mocks
_real = _mocks.evaluate
def _evaluate(spec, *a, **kw):
    ev = _real(spec, *a, **kw)
    ev.resources.append(_mocks.Declared("gcp:compute/firewall:Firewall", "open-ssh", {
        "name": "open-ssh", "sourceRanges": ["0.0.0.0/0"], "allows": [{"protocol": "tcp", "ports": ["22"]}]}))
    return ev
_mocks.evaluate = _evaluate
'''


def test_cli_plan_refuses_a_violating_stack_file_with_exit_2(tmp_path: Path) -> None:
    stack_file = tmp_path / "Pulumi.policy-probe.yaml"
    stack_file.write_text((REPO / "stacks" / "Pulumi.gpu-t4x2.yaml").read_text())
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(REPO)])}
    result = subprocess.run([sys.executable, "-m", "trainctl.cli", "plan", "--stack", str(stack_file)],
                            cwd=REPO, env=env, text=True, capture_output=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "firewall-no-public-ssh" in out and "opens SSH (tcp:22) to 0.0.0.0/0" in out
    assert RULES_BY_NAME["firewall-no-public-ssh"].url in out
    assert "Traceback" not in out and "compute/instance" not in out  # refused before the plan table


def test_cli_plan_refuses_a_bucket_name_gcp_rejects(tmp_path: Path) -> None:
    """A real user error, no hooks: a bucket name Cloud Storage refuses (it may start with
    'goog' nowhere). If spec validation learns bucket names it refuses first; either way exit 2."""
    stack_file = tmp_path / "Pulumi.bucket-probe.yaml"
    text = (REPO / "stacks" / "Pulumi.gpu-t4x2.yaml").read_text()
    stack_file.write_text(text.rstrip("\n") + "\n  trainctl:bucket:\n    name: goog-checkpoints\n")
    result = subprocess.run([sys.executable, "-m", "trainctl.cli", "plan", "--stack", str(stack_file)],
                            cwd=REPO, text=True, capture_output=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "goog-checkpoints" in out and "Traceback" not in out
