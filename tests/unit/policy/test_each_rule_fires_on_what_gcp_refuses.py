"""Each rule of the policy pack fires on a deliberately bad resource, with a message that says
what to set, and stays quiet on the good one beside it; list-reading rules also see the read-only
lists the Pulumi engine hands over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policy.declared import (
    AR_IAM,
    BUCKET_IAM,
    FUNCTION_V2_IAM,
    T_AR_REPOSITORY,
    T_BUCKET,
    T_CLUSTER,
    T_FIREWALL,
    T_INSTANCE,
    T_NODEPOOL,
    T_SERVICE,
    T_TPU_VM,
    Resource,
)
from policy.gke_rules import tpu_topology_hosts
from policy.rules import RULES, RULES_BY_NAME, Violation
from policy.storage_rules import RETAIN_LABEL

TRAINCTL = {"managed-by": "trainctl", "trainctl-stack": "s"}


def fired(rule: str, *resources: Resource) -> list[Violation]:
    out = RULES_BY_NAME[rule].run(list(resources))
    for v in out:
        assert v.rule == rule and v.url == RULES_BY_NAME[rule].url and v.url in str(v)
    return out


def instance(**props: Any) -> Resource:
    return Resource(T_INSTANCE, "vm", {"name": "vm-0", "machineType": "n1-standard-8", **props})


def test_release_channel_requires_node_pool_auto_upgrade() -> None:
    cluster = Resource(T_CLUSTER, "c", {"name": "s-gke", "releaseChannel": {"channel": "REGULAR"}})
    pool = Resource(T_NODEPOOL, "p", {"name": "s-pool", "cluster": "s-gke",
                                      "management": {"autoRepair": True, "autoUpgrade": False}})
    (v,) = fired("gke-release-channel-auto-upgrade", cluster, pool)
    assert v.resource == "p" and "auto_upgrade=True" in v.message and "REGULAR" in v.message
    # By id too, and fine when upgrading or when the cluster has no channel.
    by_id = Resource(T_NODEPOOL, "p", {**pool.props, "cluster": "projects/x/locations/z/clusters/s-gke"})
    assert fired("gke-release-channel-auto-upgrade", cluster, by_id)
    ok = Resource(T_NODEPOOL, "p", {**pool.props, "management": {"autoUpgrade": True}})
    assert not fired("gke-release-channel-auto-upgrade", cluster, ok)
    no_channel = Resource(T_CLUSTER, "c", {"name": "s-gke"})
    assert not fired("gke-release-channel-auto-upgrade", no_channel, pool)


def test_trainctl_clusters_must_be_deletable() -> None:
    for props in ({"deletionProtection": True}, {}):  # unset defaults to true in pulumi-gcp
        (v,) = fired("gke-cluster-deletable",
                     Resource(T_CLUSTER, "c", {"name": "s-gke", "resourceLabels": TRAINCTL, **props}))
        assert "deletion_protection=False" in v.message
    assert not fired("gke-cluster-deletable", Resource(T_CLUSTER, "c", {
        "name": "s-gke", "resourceLabels": TRAINCTL, "deletionProtection": False}))


def test_gke_names_over_40_characters_are_refused_as_gke_refuses_them() -> None:
    long = "x" * 41
    (v,) = fired("gke-name-length", Resource(T_CLUSTER, "c", {"name": long}))
    assert "41 characters" in v.message
    assert fired("gke-name-length", Resource(T_NODEPOOL, "p", {"name": long}))
    assert not fired("gke-name-length", Resource(T_NODEPOOL, "p", {"name": "x" * 40}))


def test_multi_host_tpu_pool_holds_exactly_one_slice() -> None:
    def pool(count: float, topology: str = "4x4") -> Resource:
        return Resource(T_NODEPOOL, "p", {
            "name": "s-pool", "nodeCount": count, "nodeConfig": {"machineType": "ct5lp-hightpu-4t"},
            "placementPolicy": {"type": "COMPACT", "tpuTopology": topology}})
    (v,) = fired("gke-tpu-multihost-node-count", pool(8.0))
    assert "8 node(s)" in v.message and "node_count=4" in v.message
    assert not fired("gke-tpu-multihost-node-count", pool(4.0))
    assert tpu_topology_hosts("ct5lp-hightpu-4t", "4x8") == 8
    assert tpu_topology_hosts("ct4p-hightpu-4t", "2x2x4") == 4


def test_trainctl_buckets_are_removable_or_kept_on_purpose() -> None:
    bucket = {"name": "b-trainctl", "labels": TRAINCTL, "forceDestroy": False}
    (v,) = fired("bucket-removable", Resource(T_BUCKET, "b", bucket))
    assert "force_destroy=True" in v.message and "retain_on_delete" in v.message
    assert not fired("bucket-removable", Resource(T_BUCKET, "b", {**bucket, "forceDestroy": True}))
    kept = {**bucket, "labels": {**TRAINCTL, RETAIN_LABEL: "true"}}
    assert not fired("bucket-removable", Resource(T_BUCKET, "b", kept))
    assert not fired("bucket-removable", Resource(T_BUCKET, "b", bucket, {"retainOnDelete": True}))


@pytest.mark.parametrize("name", ["My_Bucket", "ab", "x" * 64, "-starts-with-dash", "goog-ckpt",
                                  "my-google-bucket", "my-g00gle-bucket", "192.168.5.4", "a..b"])
def test_bucket_names_follow_cloud_storage_rules(name: str) -> None:
    (v,) = fired("bucket-name", Resource(T_BUCKET, "b", {"name": name}))[:1]
    assert name in v.message


@pytest.mark.parametrize("name", ["my-project-gpu-t4x2-trainctl", "a_b.c-d", "abc", "x" * 63])
def test_valid_bucket_names_pass(name: str) -> None:
    assert not fired("bucket-name", Resource(T_BUCKET, "b", {"name": name}))


def test_a_bucket_the_stack_does_not_create_is_only_read() -> None:
    own = Resource(T_BUCKET, "b", {"name": "p-s-trainctl"})
    member = "serviceAccount:s-sa@p.iam.gserviceaccount.com"

    def grant(bucket: str, role: str) -> Resource:
        return Resource(BUCKET_IAM[0], f"{bucket}-{role}", {"bucket": bucket, "role": role, "member": member})

    (v,) = fired("foreign-bucket-read-only", own, grant("my-datasets", "roles/storage.objectAdmin"))
    assert v.resource == "my-datasets-roles/storage.objectAdmin"
    assert "'my-datasets'" in v.message and "roles/storage.objectViewer" in v.message
    assert not fired("foreign-bucket-read-only", own, grant("my-datasets", "roles/storage.objectViewer"),
                     grant("p-s-trainctl", "roles/storage.objectAdmin"))


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


SPOT = {"provisioningModel": "SPOT", "preemptible": True, "automaticRestart": False,
        "onHostMaintenance": "TERMINATE", "instanceTerminationAction": "DELETE"}


@pytest.mark.parametrize("affinity", [{"type": "SPECIFIC_RESERVATION", "specificReservation": {
    "key": "compute.googleapis.com/reservation-name", "values": ["h100-block"]}}, {"type": "ANY_RESERVATION"}])
def test_spot_vms_written_by_hand_cannot_ask_for_a_reservation(affinity: dict) -> None:
    (v,) = fired("spot-no-reservation", instance(scheduling=SPOT, reservationAffinity=affinity))
    assert f"spot VM 'vm-0' asks for reserved capacity (reservation affinity {affinity['type']})" in v.message
    assert "NO_RESERVATION" in v.message and "reservations-consume" in str(v)
    # the same affinity on a standard VM, and NO_RESERVATION (or none) on a spot one, are fine
    assert not fired("spot-no-reservation", instance(reservationAffinity=affinity))
    assert not fired("spot-no-reservation", instance(scheduling=SPOT, reservationAffinity={"type": "NO_RESERVATION"}))
    assert not fired("spot-no-reservation", instance(scheduling=SPOT))


def test_spot_gke_node_pools_cannot_ask_for_a_reservation() -> None:
    config = {"machineType": "g2-standard-8", "spot": True, "reservationAffinity": {
        "consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
        "values": ["l4-block"]}}
    (v,) = fired("spot-no-reservation", Resource(T_NODEPOOL, "p", {"name": "s-gpu", "nodeConfig": config}))
    assert "spot GKE node pool 's-gpu'" in v.message
    on_demand = {**config, "spot": False}
    assert not fired("spot-no-reservation", Resource(T_NODEPOOL, "p", {"name": "s-gpu", "nodeConfig": on_demand}))


def test_a_flex_start_vm_without_a_max_run_duration_is_refused() -> None:
    scheduling = {"provisioningModel": "FLEX_START", "automaticRestart": False, "onHostMaintenance": "TERMINATE",
                  "instanceTerminationAction": "DELETE"}
    (v,) = fired("flex-start-time-limited", instance(machineType="g2-standard-8", scheduling=scheduling))
    assert "set scheduling.max_run_duration" in v.message  # the other refusals: test_flex_start_rule.py
    timed = {**scheduling, "maxRunDuration": {"seconds": 3600}}
    assert not fired("flex-start-time-limited", instance(machineType="g2-standard-8", scheduling=timed))


def test_an_a4_vm_on_demand_and_a_flex_start_vm_on_any_reservation_are_refused() -> None:
    on_demand = {"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE"}
    (v,) = fired("provisioning-model-offered", instance(machineType="a4-highgpu-8g", scheduling=on_demand))
    assert "provisioningModel is STANDARD" in v.message  # the other cases: test_consumption_rules.py
    (v,) = fired("flex-start-no-reservation", instance(scheduling={"provisioningModel": "FLEX_START"}))
    assert "set reservation_affinity type NO_RESERVATION" in v.message


def test_a_flex_start_gke_pool_of_static_size_with_auto_repair_and_no_affinity_is_refused_three_times() -> None:
    # what the simulated GKE refuses too (facts/gke_node_pools.py; Cluster Toolkit gke-node-pool/main.tf)
    config = {"machineType": "g2-standard-8", "flexStart": True}
    static = Resource(T_NODEPOOL, "p", {"name": "s-pool", "nodeCount": 2, "nodeConfig": config,
                                        "management": {"autoRepair": True, "autoUpgrade": True}})
    found = [v.message for v in fired("gke-flex-start-pool", static)]
    assert len(found) == 3 and "static size" in found[0] and "auto_repair" in found[1] and "NO_RESERVATION" in found[2]
    ok = Resource(T_NODEPOOL, "p", {
        "name": "s-pool", "autoscaling": {"totalMaxNodeCount": 2, "locationPolicy": "ANY"},
        "nodeConfig": {**config, "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}},
        "management": {"autoRepair": False, "autoUpgrade": True}})
    assert not fired("gke-flex-start-pool", ok)


@pytest.mark.parametrize("allow", [{"protocol": "tcp", "ports": ["22"]}, {"protocol": "tcp"},
                                   {"protocol": "all"}, {"protocol": "tcp", "ports": ["20-30"]}])
@pytest.mark.parametrize("anywhere", ["0.0.0.0/0", "::/0"])
def test_firewalls_never_open_ssh_to_the_internet(allow: dict, anywhere: str) -> None:
    fw = Resource(T_FIREWALL, "fw", {"name": "s-fw-ssh", "direction": "INGRESS",
                                     "sourceRanges": ["203.0.113.0/24", anywhere], "allows": [allow]})
    (v,) = fired("firewall-no-public-ssh", fw)
    assert anywhere in v.message and "source_ranges" in v.message


def test_firewalls_to_own_ranges_or_other_ports_pass() -> None:
    for props in ({"sourceRanges": ["203.0.113.0/24"], "allows": [{"protocol": "tcp", "ports": ["22"]}]},
                  {"sourceRanges": ["0.0.0.0/0"], "allows": [{"protocol": "tcp", "ports": ["443"]}]},
                  {"sourceRanges": ["0.0.0.0/0"], "allows": [{"protocol": "icmp"}]}):
        assert not fired("firewall-no-public-ssh", Resource(T_FIREWALL, "fw", props))


def test_ssh_keys_metadata_needs_os_login_off() -> None:
    meta = {"ssh-keys": "u:ssh-ed25519 AAAA u", "block-project-ssh-keys": "TRUE"}
    for typ in (T_INSTANCE, T_TPU_VM):
        (v,) = fired("ssh-keys-need-oslogin-off", Resource(typ, "n", {"name": "n", "metadata": meta}))
        assert "enable-oslogin='FALSE'" in v.message
        ok = {"name": "n", "metadata": {**meta, "enable-oslogin": "FALSE"}}
        assert not fired("ssh-keys-need-oslogin-off", Resource(typ, "n", ok))


def test_labels_follow_gcp_rules() -> None:
    for labels in ({"Team": "ml"}, {"team": "ML"}, {"1team": "x"}, {"team": "a" * 64},
                   {"team": "a.b"}, {f"k{i}": "v" for i in range(65)}):
        assert fired("labels-valid", Resource(T_BUCKET, "b", {"labels": labels})), labels
    assert fired("labels-valid", Resource(T_NODEPOOL, "p", {"nodeConfig": {"resourceLabels": {"A": "b"}}}))
    # Kubernetes node labels on a pool follow Kubernetes' rules, not GCP's.
    assert not fired("labels-valid", Resource(T_NODEPOOL, "p", {"nodeConfig": {"labels": {"A.b/c": "D"}}}))
    assert not fired("labels-valid", Resource(T_INSTANCE, "i", {"labels": {
        **TRAINCTL, "trainctl-expires": "1900000000", "empty": ""}}))


def test_second_gen_functions_are_invoked_with_run_invoker() -> None:
    member = {"cloudFunction": "s-reaper", "role": "roles/cloudfunctions.invoker", "member": "serviceAccount:x"}
    (v,) = fired("function-v2-run-invoker", Resource(FUNCTION_V2_IAM[0], "inv", member))
    assert "roles/run.invoker" in v.message
    assert not fired("function-v2-run-invoker",
                     Resource(FUNCTION_V2_IAM[0], "inv", {**member, "role": "roles/cloudfunctions.viewer"}))


def test_enabled_apis_stay_enabled_on_destroy() -> None:
    svc = {"service": "container.googleapis.com", "project": "p"}
    assert fired("api-service-not-disabled-on-destroy", Resource(T_SERVICE, "api", svc))
    assert not fired("api-service-not-disabled-on-destroy",
                     Resource(T_SERVICE, "api", {**svc, "disableOnDestroy": False}))


@pytest.mark.parametrize("rid, ok", [("s-images", True), ("a", True), ("1abc", False), ("abc-", False),
                                     ("Abc", False), ("a_b", False), ("a" * 63, True), ("a" * 64, False)])
def test_artifact_registry_repository_ids_follow_its_rules(rid: str, ok: bool) -> None:
    repo = Resource(T_AR_REPOSITORY, "r", {"repositoryId": rid, "format": "DOCKER"})
    assert bool(fired("artifact-registry-repository-id", repo)) is not ok


def test_image_repositories_are_never_public() -> None:
    grant = {"repository": "s-images", "role": "roles/artifactregistry.reader", "member": "allUsers"}
    (v,) = fired("artifact-registry-not-public", Resource(AR_IAM[0], "g", grant))
    assert "allUsers" in v.message
    assert not fired("artifact-registry-not-public",
                     Resource(AR_IAM[0], "g", {**grant, "member": "serviceAccount:s-sa@p.iam.gserviceaccount.com"}))
    assert fired("artifact-registry-not-public",
                 Resource(AR_IAM[1], "g", {"role": "roles/artifactregistry.reader",
                                           "members": ["serviceAccount:x", "allAuthenticatedUsers"]}))


def _nics(*types: str) -> list[dict[str, Any]]:
    return [{"subnetwork": f"sub-{i}", "nicType": t} for i, t in enumerate(types)]


def test_gpudirect_vms_carry_their_familys_gpu_nics() -> None:
    # A3 Mega without its 8 GPU NICs: NCCL would run over nic0's TCP (GPU network bandwidth page)
    (v,) = fired("gpudirect-nics", instance(machineType="a3-megagpu-8g", networkInterfaces=_nics("GVNIC")))
    assert "8 GVNIC" in v.message and "plain TCP" in v.message
    assert not fired("gpudirect-nics", instance(machineType="a3-megagpu-8g", networkInterfaces=_nics(*["GVNIC"] * 9)))
    # A4: 2 gVNICs then 8 MRDMA; gVNICs where MRDMA belongs are refused
    assert fired("gpudirect-nics", instance(machineType="a4-highgpu-8g", networkInterfaces=_nics(*["GVNIC"] * 10)))
    assert not fired("gpudirect-nics", instance(machineType="a4-highgpu-8g",
                                                networkInterfaces=_nics("GVNIC", "GVNIC", *["MRDMA"] * 8)))
    assert not fired("gpudirect-nics", instance(networkInterfaces=_nics("default")))  # n1: no GPUDirect


def test_a3_ultra_and_a4_boot_from_hyperdisk() -> None:
    disk = {"initializeParams": {"type": "pd-balanced"}}
    (v,) = fired("hyperdisk-only-families", instance(machineType="a3-ultragpu-8g", bootDisk=disk))
    assert "hyperdisk-balanced" in v.message
    assert not fired("hyperdisk-only-families", instance(
        machineType="a3-ultragpu-8g", bootDisk={"initializeParams": {"type": "hyperdisk-balanced"}}))
    assert not fired("hyperdisk-only-families", instance(machineType="a3-megagpu-8g", bootDisk=disk))


def test_compact_placement_holds_supported_terminating_vms_within_its_limit() -> None:
    from policy.gpudirect_rules import T_RESOURCE_POLICY

    policy = Resource(T_RESOURCE_POLICY, "pp", {"name": "s-placement",
                                                "groupPlacementPolicy": {"collocation": "COLLOCATED"}})
    link = "https://www.googleapis.com/compute/v1/projects/p/regions/r/resourcePolicies/s-placement"

    def vm(i: int, machine: str = "a2-highgpu-8g", maintenance: str = "TERMINATE") -> Resource:
        return Resource(T_INSTANCE, f"vm{i}", {"name": f"s-node-{i}", "machineType": machine,
                                               "resourcePolicies": link,
                                               "scheduling": {"onHostMaintenance": maintenance}})

    assert not fired("compact-placement-limits", policy, vm(0), vm(1))
    (v,) = fired("compact-placement-limits", policy, vm(0, machine="n1-standard-8"))
    assert "n1-standard-8" in v.message
    (v,) = fired("compact-placement-limits", policy, vm(0, maintenance="MIGRATE"))
    assert "TERMINATE" in v.message
    (v,) = fired("compact-placement-limits", policy, *[vm(i) for i in range(151)])
    assert "151 VMs" in v.message and "150" in v.message


def test_list_rules_fire_on_the_read_only_lists_the_policy_engine_hands_over() -> None:
    """Under `pulumi up --policy-pack`, pulumi_policy wraps a resource's properties in proxies
    whose lists are Sequences, not lists; the list-reading rules must still see them."""
    from pulumi_policy.proxy import unknown_checking_proxy

    props = {"direction": "INGRESS", "sourceRanges": ["0.0.0.0/0"],
             "allows": [{"protocol": "tcp", "ports": ["22"]}]}
    proxied = unknown_checking_proxy(props)
    assert not isinstance(proxied["sourceRanges"], list)
    assert fired("firewall-no-public-ssh", Resource(T_FIREWALL, "fw", proxied))


def test_a_role_that_changes_vms_is_granted_only_on_the_vms_it_names() -> None:
    from policy.iam_rules import T_CUSTOM_ROLE, T_PROJECT_MEMBER

    role = Resource(T_CUSTOM_ROLE, "role", {"project": "p", "roleId": "watch",
                                            "permissions": ["compute.instances.get", "compute.instances.setLabels"]})
    grant = {"project": "p", "role": "projects/p/roles/watch", "member": "serviceAccount:n@p.iam.gserviceaccount.com"}
    (v,) = fired("vm-changes-scoped", role, Resource(T_PROJECT_MEMBER, "grant", grant))
    assert v.resource == "grant" and "resource.name" in v.message
    named = {"expression": 'resource.name == "projects/p/zones/z/instances/s-node-0"', "title": "t"}
    assert not fired("vm-changes-scoped", role, Resource(T_PROJECT_MEMBER, "grant", {**grant, "condition": named}))
    deleting = Resource(T_CUSTOM_ROLE, "role", {**role.props, "permissions": [
        "compute.instances.setLabels", "compute.instances.delete"]})
    (v,) = fired("vm-changes-scoped", deleting, Resource(T_PROJECT_MEMBER, "grant", {**grant, "condition": named}))
    assert v.resource == "role" and "compute.instances.delete" in v.message
    # the reaper's role deletes but changes nothing: not this rule's
    reaper = Resource(T_CUSTOM_ROLE, "reaper", {"project": "p", "roleId": "reaper",
                                                "permissions": ["compute.instances.list", "compute.instances.delete"]})
    assert not fired("vm-changes-scoped", reaper, Resource(T_PROJECT_MEMBER, "g", {**grant, "role": "projects/p/roles/reaper"}))


def test_every_rule_has_a_firing_test() -> None:
    text = Path(__file__).read_text()
    missing = [r.name for r in RULES if f'"{r.name}"' not in text.split("def test_every_rule_has")[0]]
    assert not missing

