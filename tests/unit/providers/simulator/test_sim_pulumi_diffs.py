"""How the provider stand-in decides update vs replace, as the Terraform schema and its
diff-suppress functions decide it (no cloud involved): what a second `up` would plan."""

from __future__ import annotations

from typing import Any

from gcpsim.pulumi.gcp import TYPES, GcpPackage
from gcpsim.pulumi.properties import apply_ignore_changes, parse_path

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
PUBSUB = "https://www.googleapis.com/auth/pubsub"


def resource(token: str) -> Any:
    return GcpPackage({"project": "p"}).resource(token)


def tpu_inputs(scopes: list[str]) -> dict[str, Any]:
    return {"name": "t", "zone": "us-west4-a", "acceleratorType": "v5litepod-8",
            "serviceAccount": {"email": "sa@p.iam.gserviceaccount.com", "scopes": scopes}}


def test_a_tpu_given_the_short_scope_is_replaced_when_the_api_answers_the_full_url():
    # resource_tpu_v2_vm.go: scopes are sent and read unchanged; the suppress only drops pubsub
    tpu = resource("gcp:tpu/v2Vm:V2Vm")
    answered = tpu_inputs([CLOUD_PLATFORM, PUBSUB])
    diff = tpu.diff(tpu_inputs(["cloud-platform"]), answered, tpu_inputs(["cloud-platform"]))
    assert diff.replaces == ["serviceAccount.scopes"]


def test_a_tpu_keeps_its_scopes_when_the_api_answers_what_was_sent_plus_pubsub():
    tpu = resource("gcp:tpu/v2Vm:V2Vm")
    for sent in (["cloud-platform"], [CLOUD_PLATFORM]):
        diff = tpu.diff(tpu_inputs(sent), tpu_inputs([*sent, PUBSUB]), tpu_inputs(sent))
        assert diff.changed == [], sent


def test_an_instance_canonicalizes_the_short_scope_so_no_diff_follows():
    vm = resource("gcp:compute/instance:Instance")
    declared = {"name": "v", "serviceAccount": {"email": "e", "scopes": ["cloud-platform"]}}
    state = {"name": "v", "serviceAccount": {"email": "e", "scopes": [CLOUD_PLATFORM]}}
    assert vm.diff(declared, state, declared).changed == []


def test_an_image_family_matches_the_image_the_disk_was_made_from_and_another_family_replaces():
    vm = resource("gcp:compute/instance:Instance")
    state = {"bootDisk": {"initializeParams": {"image": "https://www.googleapis.com/compute/v1/projects/"
                                                        "ubuntu-os-cloud/global/images/ubuntu-2204-jammy-v20250101"}}}

    def planned(image: str) -> Any:
        declared = {"bootDisk": {"initializeParams": {"image": image}}}
        return vm.diff(declared, state, declared)

    assert planned("projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts").changed == []
    assert planned("projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts").replaces == [
        "bootDisk.initializeParams.image"]


def test_a_changed_label_updates_and_a_changed_machine_type_updates_but_a_new_name_replaces():
    vm = resource("gcp:compute/instance:Instance")
    state = {"name": "v", "machineType": "n1-standard-2", "labels": {"a": "1"}}
    assert vm.diff(state, state, {**state, "labels": {"a": "2"}}).replaces == []
    assert vm.diff(state, state, {**state, "machineType": "n1-standard-4"}).changed == ["machineType"]
    renamed = vm.diff(state, state, {**state, "name": "w", "__defaults": []})
    assert renamed.replaces == ["name"] and renamed.delete_before_replace


def test_a_label_the_program_drops_is_a_change():
    bucket = resource("gcp:storage/bucket:Bucket")
    state = {"name": "b", "labels": {"a": "1", "b": "2"}}
    assert bucket.diff(state, state, {"name": "b", "labels": {"a": "1"}}).changed == ["labels"]


def test_ignore_changes_keeps_the_recorded_expiry_label_only():
    olds = {"labels": {"trainctl-expires": "100", "team": "a"}}
    news = {"labels": {"trainctl-expires": "200", "team": "b"}}
    kept = apply_ignore_changes(news, olds, ['labels["trainctl-expires"]'])
    assert kept == {"labels": {"trainctl-expires": "100", "team": "b"}}
    assert parse_path('nodeConfig.resourceLabels["a.b"]') == ["nodeConfig", "resourceLabels", "a.b"]


def test_every_resource_type_the_program_declares_is_modelled():
    from infra.providers.gcp.program.mocks import evaluate
    from infra.spec.stack_config import available_stacks, load_stack

    declared = {r.type for name in available_stacks() if load_stack(name).provider == "gcp"
                for r in evaluate(load_stack(name)).resources if r.type.startswith("gcp:")}
    assert declared - set(TYPES) == set()


def test_a_node_pools_additional_networks_read_from_the_api_replace_it_when_the_program_names_them_otherwise():
    # resource_container_node_pool.go: additional_node_network_configs.network/subnetwork are
    # ForceNew and read back from the API (flattenAdditionalNodeNetworkConfig); GKE holds names
    pool = resource("gcp:container/nodePool:NodePool")
    answered = {"name": "p", "networkConfig": {"additionalNodeNetworkConfigs": [
        {"network": "vpc-1", "subnetwork": "sub-1"}]}}
    pool.fetch = lambda url, what: answered  # type: ignore[method-assign]
    id_ = "projects/p/locations/us-central1-a/clusters/c/nodePools/p"
    by_name = {"name": "p", "cluster": "c", "networkConfig": answered["networkConfig"]}
    assert pool.diff(by_name, pool.read(id_, by_name, by_name), by_name).changed == []
    by_path = {**by_name, "networkConfig": {"additionalNodeNetworkConfigs": [
        {"network": "projects/p/global/networks/vpc-1", "subnetwork": "projects/p/regions/us-central1/subnetworks/sub-1"}]}}
    diff = pool.diff(by_path, pool.read(id_, by_path, by_path), by_path)
    assert diff.replaces and all(p.startswith("networkConfig.additionalNodeNetworkConfigs") for p in diff.replaces)
