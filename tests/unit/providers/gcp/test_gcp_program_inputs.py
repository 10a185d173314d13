"""Issue 13 fixes in the Pulumi program, asserted on the inputs GCP would receive (mocks)."""

from __future__ import annotations

import pytest

from infra.spec import catalog
from infra.providers.gcp.program.mocks import evaluate
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import load_stack

PUBKEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMOCKKEY"


def gcp_spec(**over) -> ClusterSpec:
    fields = dict(name="t", provider="gcp", project="my-project", zone="us-central1-a",
                  ssh={"source_ranges": ["203.0.113.7/32"]})
    return ClusterSpec.model_validate({**fields, **over})


def test_named_stack_bucket_is_kept_and_said_in_outputs():
    ev = evaluate(load_stack("gpu-t4x2"), PUBKEY)
    (bucket,) = ev.of_type("storage/bucket:Bucket")
    assert bucket.inputs["forceDestroy"] is False
    assert bucket.inputs["labels"]["trainctl-retain"] == "true"
    assert ev.outputs["bucket_kept_on_down"] is True


def test_ephemeral_stack_bucket_goes_with_its_objects():
    spec = load_stack("gpu-t4x2").model_copy(update={"ephemeral": True})
    ev = evaluate(spec, PUBKEY)
    (bucket,) = ev.of_type("storage/bucket:Bucket")
    assert bucket.inputs["forceDestroy"] is True
    assert "trainctl-retain" not in bucket.inputs["labels"]
    assert ev.outputs["bucket_kept_on_down"] is False


@pytest.mark.parametrize("stack", ["gke-l4", "gke-tpu-v5e"])
def test_gke_named_cluster_is_deletable_and_pools_auto_upgrade(stack):
    ev = evaluate(load_stack(stack), PUBKEY)
    (cluster,) = ev.of_type("container/cluster:Cluster")
    assert cluster.inputs["deletionProtection"] is False
    assert cluster.inputs["releaseChannel"]["channel"] == "REGULAR"
    for pool in ev.of_type("container/nodePool:NodePool"):
        assert pool.inputs["management"] == {"autoRepair": True, "autoUpgrade": True}


def test_gke_workload_identity_binds_the_runner_ksa_to_the_nodes_gsa():
    spec = load_stack("gke-l4")
    ev = evaluate(spec, PUBKEY)
    (binding,) = ev.of_type("serviceaccount/iAMMember:IAMMember")
    assert binding.inputs["role"] == "roles/iam.workloadIdentityUser"
    assert binding.inputs["member"] == (f"serviceAccount:{spec.project}.svc.id.goog"
                                        f"[{catalog.GKE_KSA_NAMESPACE}/{catalog.GKE_KSA_NAME}]")
    (account,) = [a for a in ev.of_type("serviceaccount/account:Account")]
    email = f"{account.inputs['accountId']}@{spec.project}.iam.gserviceaccount.com"
    assert ev.outputs["inventory"]["gke_service_account"] == email


def test_several_multi_host_slices_get_one_pool_each():
    spec = gcp_spec(kind="gke", zone="us-west4-a", tpu={"type": "v5litepod-16"}, nodes=8)
    tpu = catalog.TPUS["v5litepod-16"]
    pools = evaluate(spec, PUBKEY).of_type("container/nodePool:NodePool")
    assert len(pools) == 2
    for pool in pools:
        assert pool.inputs["nodeCount"] == tpu.hosts
        assert pool.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": tpu.topology}
    assert len({p.inputs["name"] for p in pools}) == 2


@pytest.mark.parametrize("stack, extra", [
    ("gpu-t4x2", set()), ("tpu-v5e-8", {"tpu.googleapis.com"}),
    ("gke-l4", {"container.googleapis.com"}),
    ("gpu-l4-spot", {"cloudfunctions.googleapis.com", "run.googleapis.com",
                     "cloudbuild.googleapis.com", "cloudscheduler.googleapis.com"}),
])
def test_required_apis_are_enabled_and_left_on_at_destroy(stack, extra):
    services = evaluate(load_stack(stack), PUBKEY).of_type("projects/service:Service")
    # Artifact Registry on every stack: the experiment's images live there; Resource Manager
    # first, which the provider reads the project through after enabling any of the others
    assert {s.inputs["service"] for s in services} == {
        "cloudresourcemanager.googleapis.com", "compute.googleapis.com", "storage.googleapis.com",
        "iam.googleapis.com", "artifactregistry.googleapis.com"} | extra
    assert all(s.inputs["disableOnDestroy"] is False for s in services)


def test_reaper_function_can_list_gke_clusters():
    from infra.providers.gcp.program import scheduled_reaper

    assert "google-cloud-container" in getattr(scheduled_reaper, "REQUIREMENTS", "")


def test_tpu_stacks_declare_no_queued_resource_and_carry_metadata():
    ev = evaluate(load_stack("tpu-v5e-16"), PUBKEY)
    assert not ev.of_type("tpu/v2QueuedResource:V2QueuedResource")
    (vm,) = ev.of_type("tpu/v2Vm:V2Vm")
    assert vm.inputs["metadata"]["enable-oslogin"] == "FALSE"


def test_a_queued_tpu_is_requested_with_the_whole_node_the_stack_declares():
    """The request trainctl sends (and `pulumi up` users through gcloud) carries what pulumi-gcp's
    V2QueuedResource cannot: the SSH key, the firewall tag, the labels and the account."""
    ev = evaluate(load_stack("tpu-v5e-8-queued"), PUBKEY)
    assert not ev.of_type("tpu/v2Vm:V2Vm") and not ev.of_type("tpu/v2QueuedResource:V2QueuedResource")
    body = ev.outputs["queued_tpu"]
    (spec,) = body["tpu"]["nodeSpec"]
    node = spec["node"]
    assert PUBKEY in node["metadata"]["ssh-keys"] and node["metadata"]["enable-guest-attributes"] == "TRUE"
    assert node["tags"] == ["tpu-v5e-8-queued-node"]
    assert node["labels"]["trainctl-stack"] == "tpu-v5e-8-queued" and "trainctl-expires" in node["labels"]
    assert node["serviceAccount"]["email"].startswith("tpu-v5e-8-queued-sa@")
    assert spec["nodeId"] == "tpu-v5e-8-queued-tpu" and node["acceleratorType"] == "v5litepod-8"
    assert body["spot"] == {} and body["queueingPolicy"] == {"validUntilDuration": "5400s"}
    command = ev.outputs["queued_tpu_gcloud"]
    assert command.startswith("gcloud compute tpus queued-resources create tpu-v5e-8-queued-tpu ")
    assert "--spot" in command and "--tags=tpu-v5e-8-queued-node" in command and "ssh-ed25519" in command


@pytest.mark.parametrize("reservation", ["v5e-block", "any"])
def test_a_queued_tpu_asks_for_reserved_capacity_by_name_or_any(reservation):
    spec = load_stack("tpu-v5e-8-queued", overrides={"spot": False, "reservation": reservation})
    body = evaluate(spec, PUBKEY).outputs["queued_tpu"]
    node = body["tpu"]["nodeSpec"][0]["node"]
    if reservation == "any":
        assert node["schedulingConfig"] == {"reserved": True} and "reservationName" not in body
    else:
        assert body["reservationName"] == "projects/my-project/locations/us-west4-a/reservations/v5e-block"
        assert "schedulingConfig" not in node
    assert "spot" not in body


def _ignored_changes(monkeypatch, expires_at):
    import pulumi.runtime.resource as runtime_resource

    seen: dict[str, list[str] | None] = {}
    original = runtime_resource._translate_ignore_changes

    def record(res, typ, ignore_changes):
        seen[getattr(res, "_name", "")] = ignore_changes
        return original(res, typ, ignore_changes)

    monkeypatch.setattr(runtime_resource, "_translate_ignore_changes", record)
    ev = evaluate(load_stack("gke-l4"), PUBKEY, expires_at=expires_at)
    return ev, seen


def test_plain_pulumi_up_writes_the_expiry_only_at_creation(monkeypatch):
    ev, seen = _ignored_changes(monkeypatch, None)
    labeled = [r.name for r in ev.resources
               if "trainctl-expires" in (r.inputs.get("labels") or r.inputs.get("resourceLabels")
                                         or r.inputs.get("nodeConfig", {}).get("resourceLabels") or {})]
    assert labeled
    for name in labeled:
        assert 'labels["trainctl-expires"]' in seen[name] or \
            'resourceLabels["trainctl-expires"]' in seen[name], name
    pool = next(r for r in ev.of_type("container/nodePool:NodePool"))
    assert 'nodeConfig.resourceLabels["trainctl-expires"]' in seen[pool.name]


def test_an_expiry_recorded_by_trainctl_is_applied(monkeypatch):
    _, seen = _ignored_changes(monkeypatch, 1_900_000_000)
    assert not any(seen.values())


def test_gke_stacks_need_no_ssh_key():
    ev = evaluate(load_stack("gke-tpu-v5e"), None)
    assert ev.of_type("container/cluster:Cluster")
    assert not any("ssh-keys" in (r.inputs.get("metadata") or {}) for r in ev.resources)


def test_vm_stacks_still_require_a_key():
    with pytest.raises(ValueError, match="needs an SSH public key"):
        evaluate(load_stack("gpu-t4x2"), None)
