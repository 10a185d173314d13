"""The Pulumi program for every GCP stack in stacks/, evaluated under Pulumi's mocks: assertions
on the declared resources (firewalls, GPU scheduling, TPU type/runtime, labels, metadata,
outputs) — what `pulumi up` would ask GCP for."""

from __future__ import annotations

import json

import pulumi
import pytest

from infra.spec import catalog
from infra.providers.gcp.program.mocks import RecordingMocks, evaluate
from infra.providers.gcp.realizer import plan
from infra.providers.gcp.program.cluster import service_account_id
from infra.providers.gcp.program.scheduled_reaper import REAPER_PERMISSIONS, build_account_id, reaper_role_id, source_object_name
from infra.providers.inventory import Inventory
from trainctl.launchers.jax_env import JAX_COORDINATOR_PORT
from infra.spec.stack_config import available_stacks, load_stack, spec_from_pulumi_config

GCP_STACKS = [s for s in available_stacks() if load_stack(s).provider == "gcp"]
VM_STACKS = [s for s in GCP_STACKS if load_stack(s).kind == "vm"]
# TPU stacks whose TPU the program declares (a queued one is requested by trainctl: test_queued_tpu.py)
TPU_STACKS = [s for s in GCP_STACKS if load_stack(s).kind == "tpu" and not load_stack(s).tpu.queued]
GKE_STACKS = [s for s in GCP_STACKS if load_stack(s).kind == "gke"]
_cache: dict = {}


def evaluated_stack(name: str):
    if name not in _cache:
        spec = load_stack(name)
        _cache[name] = (spec, evaluate(spec, PUBKEY))
    return _cache[name]
PUBKEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMOCKKEY"


def test_the_required_stacks_exist():
    assert {"gpu-t4x2", "gpu-a100x8x2", "gpu-l4-spot", "tpu-v5e-8", "tpu-v5e-16", "gke-l4",
            "gke-tpu-v5e", "local"} <= set(available_stacks())


@pytest.fixture(params=GCP_STACKS)
def evaluated(request):
    return evaluated_stack(request.param)


def test_firewalls_are_least_privilege(evaluated):
    spec, ev = evaluated
    rules = {r.inputs["name"]: r.inputs for r in ev.of_type("Firewall")}
    tag = f"{spec.name}-node"
    # a GPUDirect family's extra networks: node to node only, like fw-internal
    gpu_rules = {n: rules.pop(n) for n in list(rules) if n.startswith(f"{spec.name}-fw-gpunet-")}
    for rule in gpu_rules.values():
        assert (rule["sourceTags"], rule["targetTags"], rule["direction"]) == ([tag], [tag], "INGRESS")
        assert "sourceRanges" not in rule
    internal = rules[f"{spec.name}-fw-internal"]
    assert internal["sourceTags"] == [tag] and internal["targetTags"] == [tag]
    assert "sourceRanges" not in internal
    for rule in rules.values():
        assert "0.0.0.0/0" not in rule.get("sourceRanges", [])
        assert rule["direction"] == "INGRESS"
    # JAX's coordinator port as trainctl launches it: node to node, and from nowhere else
    assert [n for n, r in rules.items() if admits_tcp(r, JAX_COORDINATOR_PORT)] == [f"{spec.name}-fw-internal"]
    if spec.kind == "gke":
        assert set(rules) == {f"{spec.name}-fw-internal"}
    else:
        ssh = rules[f"{spec.name}-fw-ssh"]
        assert ssh["allows"] == [{"protocol": "tcp", "ports": ["22"]}]
        assert ssh["sourceRanges"] == list(spec.ssh.source_ranges) and ssh["targetTags"] == [tag]
        assert len(rules) == 2


def admits_tcp(rule: dict, port: int) -> bool:
    """Whether a firewall rule's allows take TCP to `port` (no ports: all of them)."""
    def covers(spec: str) -> bool:
        low, _, high = spec.partition("-")
        return int(low) <= port <= int(high or low)
    return any(a["protocol"] in ("tcp", "all") and (not a.get("ports") or any(covers(p) for p in a["ports"]))
               for a in rule["allows"])


def test_bucket_is_private_with_lifecycle(evaluated):
    spec, ev = evaluated
    (bucket,) = ev.of_type("storage/bucket:Bucket")
    assert bucket.inputs["uniformBucketLevelAccess"] is True
    assert bucket.inputs["publicAccessPrevention"] == "enforced"
    assert bucket.inputs["forceDestroy"] is spec.ephemeral
    assert bucket.inputs["lifecycleRules"][0]["condition"]["age"] == spec.bucket.retention_days
    # the nodes' account: read and write objects of this bucket, nothing else
    (member,) = [m for m in ev.of_type("BucketIAMMember") if m.inputs["role"] == "roles/storage.objectAdmin"]
    assert member.inputs["member"].startswith(f"serviceAccount:{service_account_id(spec)}@")
    others = [m.inputs["role"] for m in ev.of_type("BucketIAMMember") if m is not member]
    assert others == (["roles/storage.objectViewer"] if spec.scheduled_reaper else [])  # the reaper's build


def test_the_nodes_account_only_reads_the_data_buckets():
    spec = load_stack("gpu-t4x2").model_copy(update={"data_buckets": ("my-datasets", "more.data.example")})
    readers = {m.inputs["bucket"]: m.inputs for m in evaluate(spec, PUBKEY).of_type("BucketIAMMember")
               if m.inputs["bucket"] in spec.data_buckets}
    assert set(readers) == {"my-datasets", "more.data.example"}
    for grant in readers.values():
        assert grant["role"] == "roles/storage.objectViewer"
        assert grant["member"].startswith(f"serviceAccount:{service_account_id(spec)}@")
    rows = [r for r in plan(spec) if r.kind == "storage/bucketIAMMember" and r.values.get("bucket") == "my-datasets"]
    assert [r.values["role"] for r in rows] == ["roles/storage.objectViewer"]  # visible in the plan


def test_labels_carry_stack_and_expiry(evaluated):
    spec, ev = evaluated
    for r in ev.resources:
        labels = r.inputs.get("labels") or r.inputs.get("resourceLabels")
        if labels and r.type.startswith("gcp:"):
            assert labels["managed-by"] == "trainctl" and labels["trainctl-stack"] == spec.name
            assert labels["trainctl-expires"] == "1900000000"


@pytest.mark.parametrize("stack", VM_STACKS)
def test_vm_stacks_declare_gpus_scheduling_and_metadata(stack):
    spec, ev = evaluated_stack(stack)
    instances = ev.of_type("compute/instance:Instance")
    assert len(instances) == spec.node_count
    # each node declared as its worker pool says (a stack without pools is one pool)
    pool_of = {f"{spec.name}-node-{first + k}": (role, view) for role, first, view in spec.groups()
               for k in range(view.node_count)}
    assert {inst.inputs["name"] for inst in instances} == set(pool_of)
    for inst in instances:
        i = inst.inputs
        role, view = pool_of[i["name"]]
        machine = catalog.MACHINES[view.machine_type]
        assert i["machineType"] == view.machine_type and i["zone"] == spec.zone
        assert i["labels"].get("trainctl-role") == role
        if machine.bundled_gpu or not view.gpu:
            assert "guestAccelerators" not in i
        else:
            assert i["guestAccelerators"] == [{"type": view.gpu.type, "count": view.gpu.count}]
        sched = i["scheduling"]
        # GPUs cannot live-migrate; CPU-only VMs (a pool's parameter servers) can
        assert sched["onHostMaintenance"] == ("TERMINATE" if view.gpu or spec.spot else "MIGRATE")
        if spec.spot:
            assert (sched["provisioningModel"], sched["automaticRestart"],
                    sched["instanceTerminationAction"]) == ("SPOT", False, "DELETE")
        else:
            assert sched["provisioningModel"] == "STANDARD"
        meta = i["metadata"]
        assert meta["ssh-keys"] == f"trainctl:{PUBKEY} trainctl"
        assert meta["block-project-ssh-keys"] == "TRUE" and meta["enable-guest-attributes"] == "TRUE"
        assert meta["enable-oslogin"] == "FALSE"
        assert i["tags"] == [f"{spec.name}-node"]
        assert i["bootDisk"]["initializeParams"]["image"] == (catalog.IMAGE_GPU_DEFAULT if view.gpu
                                                              else catalog.IMAGE_CPU_DEFAULT)
    nodes = ev.outputs["inventory"]["nodes"]
    assert [(n["name"], n["task"], n["accelerator"]) for n in nodes] == [
        (f"{spec.name}-node-{i}", task, str(pool_of[f"{spec.name}-node-{i}"][1].accelerator))
        for i, (task, _) in enumerate(spec.node_tasks)]


@pytest.mark.parametrize("stack", TPU_STACKS)
def test_tpu_stacks_declare_type_runtime_and_one_node_per_host(stack):
    spec, ev = evaluated_stack(stack)
    (vm,) = ev.of_type("tpu/v2Vm:V2Vm")
    assert vm.inputs["acceleratorType"] == spec.tpu.type
    assert vm.inputs["runtimeVersion"] == spec.tpu.runtime_version
    assert vm.inputs["zone"] in catalog.TPUS[spec.tpu.type].zones
    nodes = ev.outputs["inventory"]["nodes"]
    assert len(nodes) == catalog.TPUS[spec.tpu.type].hosts
    assert [n["role"] for n in nodes] == ["tpu-worker"] * len(nodes)
    # TensorFlow's TPUClusterResolver on a multi-host slice is given the slice's name
    assert {n["tpu_name"] for n in nodes} == {vm.inputs["name"]}


@pytest.mark.parametrize("stack", GKE_STACKS)
def test_gke_stacks_declare_accelerator_pools(stack):
    spec, ev = evaluated_stack(stack)
    (cluster,) = ev.of_type("container/cluster:Cluster")
    assert cluster.inputs["deletionProtection"] is False
    assert cluster.inputs["releaseChannel"] == {"channel": "REGULAR"}
    assert cluster.inputs["workloadIdentityConfig"]["workloadPool"] == f"{spec.project}.svc.id.goog"
    # pods mount data: inputs with the Cloud Storage FUSE CSI driver, a cluster add-on
    assert cluster.inputs["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
    assert cluster.inputs["removeDefaultNodePool"] is True
    pools = ev.of_type("container/nodePool:NodePool")
    assert sum(p.inputs["nodeCount"] for p in pools) == spec.node_count
    for p in pools:
        assert p.inputs["management"] == {"autoRepair": True, "autoUpgrade": True}
    pool = pools[0]
    config = pool.inputs["nodeConfig"]
    if spec.tpu:
        tpu = catalog.TPUS[spec.tpu.type]
        assert config["machineType"] == tpu.gke_machine_type
        assert pool.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": tpu.topology}
    else:
        (acc,) = config["guestAccelerators"]
        assert acc["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}
    kubeconfig = ev.outputs["kubeconfig"]
    assert "gke-gcloud-auth-plugin" in kubeconfig and "token" not in kubeconfig


def test_inventory_output_completes_into_the_shared_model(evaluated):
    spec, ev = evaluated
    inv = ev.outputs["inventory"]
    assert inv["stack"] == spec.name and inv["bucket_uri"].startswith("gs://")
    nodes = [{**n, "host_keys": [PUBKEY]} for n in inv["nodes"]]
    model = Inventory(stack=inv["stack"], provider="gcp", bucket_uri=inv["bucket_uri"],
                      nodes=nodes, ssh_private_key="/k", known_hosts="/kh",
                      gke_service_account=inv.get("gke_service_account"))
    assert (model.gke_service_account is not None) == (spec.kind == "gke")
    # GKE pods are reached through Kubernetes; a queued TPU's workers join when it is granted
    listed_later = spec.kind == "gke" or bool(spec.tpu and spec.tpu.queued)
    assert len(model.nodes) == (0 if listed_later else spec.node_count)
    assert "PRIVATE KEY" not in json.dumps(ev.outputs)


def test_stack_file_and_pulumi_config_give_the_same_spec():
    from infra.spec.stack_config import read_yaml_mapping, stack_path

    for stack in GCP_STACKS:
        config = read_yaml_mapping(stack_path(stack), "stack")["config"]
        pulumi.runtime.set_mocks(RecordingMocks(), project="trainctl", stack=stack)
        pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v)
                                       for k, v in config.items()})
        assert spec_from_pulumi_config() == load_stack(stack)


def test_local_spec_is_refused_by_the_program():
    with pytest.raises(ValueError, match="only declares gcp stacks"):
        evaluate(load_stack("local"))


def test_stack_file_cost_comments_match_the_catalog_estimate():
    from infra.spec.stack_config import stack_path

    from infra.providers.realizers import for_spec

    for stack in available_stacks():
        head = stack_path(stack).read_text().split("config:")[0]
        spec = load_stack(stack)
        assert f"About ${for_spec(spec).estimate(spec).per_hour:.2f}/hour" in head, stack


def test_reaper_only_touches_expired_trainctl_resources():
    from infra.providers.gcp.reaper import is_expired

    assert is_expired({"managed-by": "trainctl", "trainctl-expires": "100"}, now=160) == 60
    assert is_expired({"managed-by": "trainctl", "trainctl-expires": "100"}, now=99) is None
    assert is_expired({"trainctl-expires": "100"}, now=1000) is None  # not ours
    assert is_expired({"managed-by": "trainctl", "trainctl-expires": "soon"}, now=1000) is None


def test_gcp_commands_without_pulumi_cli_give_an_actionable_error(monkeypatch):
    from conftest import trainctl

    result = trainctl("up", "--stack", "gpu-t4x2", env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert "need the Pulumi CLI" in result.stderr and "Traceback" not in result.stderr


def test_plan_of_a_gcp_stack_lists_resources_and_cost_without_credentials():
    from conftest import trainctl

    result = trainctl("plan", "--stack", "gpu-a100x8x2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("compute/instance") == 2
    assert "estimated $58.92/hour; $235.68 for the 4 h TTL" in result.stdout
    # a named stack keeps its bucket on purpose (defect 4): the plan says so and how to remove it
    spec = load_stack("gpu-a100x8x2")
    assert "is kept by `trainctl down`" in result.stdout
    assert "adopted by the next `up` of this stack" in result.stdout  # not a 409 on the name
    assert "gcloud storage rm -r gs://" in result.stdout and spec.name in result.stdout


def test_scheduled_reaper_is_declared_with_least_privilege_and_the_shared_reaper_code():
    spec, ev = evaluated_stack("gpu-l4-spot")
    assert spec.scheduled_reaper
    (job,) = ev.of_type("cloudscheduler/job:Job")
    assert job.inputs["schedule"] == "*/15 * * * *"
    (fn,) = ev.of_type("cloudfunctionsv2/function:Function")
    target = job.inputs["httpTarget"]
    uri = "https://gpu-l4-spot-reaper-mock.a.run.app"
    assert target["uri"] == uri and target["oidcToken"]["audience"] == uri
    (invoker,) = ev.of_type("cloudrunv2/serviceIamMember:ServiceIamMember")
    assert invoker.inputs["role"] == "roles/run.invoker"
    assert invoker.inputs["name"].endswith("/services/gpu-l4-spot-reaper")
    assert invoker.inputs["member"] == target["oidcToken"]["serviceAccountEmail"].join(["serviceAccount:", ""])
    assert not ev.of_type("cloudfunctionsv2/functionIamMember:FunctionIamMember")
    (fn,) = ev.of_type("cloudfunctionsv2/function:Function")
    assert fn.inputs["serviceConfig"]["ingressSettings"] == "ALLOW_INTERNAL_ONLY"
    assert fn.inputs["serviceConfig"]["environmentVariables"] == {"REAP_PROJECT": spec.project}
    # The reaper's account holds one custom role with the list/get/delete permissions it uses,
    # never an admin role (instanceAdmin could set metadata, i.e. inject SSH keys, on every VM).
    (role,) = ev.of_type("projects/iAMCustomRole:IAMCustomRole")
    assert set(role.inputs["permissions"]) == set(REAPER_PERMISSIONS)
    assert all(p.rsplit(".", 1)[1] in ("list", "get", "delete") for p in role.inputs["permissions"])
    grants = {m.inputs["role"]: m.inputs["member"] for m in ev.of_type("projects/iAMMember:IAMMember")}
    reaper = grants.pop(f"projects/{spec.project}/roles/{reaper_role_id(spec)}")
    assert reaper == target["oidcToken"]["serviceAccountEmail"].join(["serviceAccount:", ""])
    # The function builds as an account of its own (new projects' default build account may
    # lack the permissions), which may only write build logs and images.
    assert fn.inputs["buildConfig"]["serviceAccount"] == (
        f"projects/{spec.project}/serviceAccounts/{build_account_id(spec)}@{spec.project}.iam.gserviceaccount.com")
    assert set(grants) == {"roles/logging.logWriter", "roles/artifactregistry.writer"}
    assert set(grants.values()) == {f"serviceAccount:{build_account_id(spec)}@{spec.project}.iam.gserviceaccount.com"}
    # its source object is named after its content: a changed reaper.py redeploys the function
    (source,) = ev.of_type("storage/bucketObject:BucketObject")
    assert source.inputs["name"] == source_object_name()
    assert fn.inputs["buildConfig"]["source"]["storageSource"]["object"] == source_object_name()
    assert not evaluated_stack("gpu-t4x2")[1].of_type("cloudscheduler/job:Job")


@pytest.mark.parametrize("stack", GCP_STACKS)
def test_outputs_hold_no_private_key_and_the_kubeconfig_is_secret(stack):
    _, ev = evaluated_stack(stack)
    text = json.dumps(ev.outputs, default=str)
    assert "PRIVATE KEY" not in text and "private_key" not in text.lower()
    if stack in GKE_STACKS:
        assert "kubeconfig" in ev.outputs and "kubeconfig" in ev.secret_outputs
    assert ev.secret_outputs <= {"kubeconfig"}  # nothing else sensitive: no needless secrets


def test_a_spot_stack_that_asks_to_be_stopped_declares_stop_and_passes_the_policy():
    """instance_termination_action is pulumi-gcp's InstanceSchedulingArgs field; GCE takes STOP
    or DELETE for spot VMs only (policy rule spot-scheduling-consistent)."""
    from policy.declared import Resource
    from policy.rules import check_resources

    spec = load_stack("gpu-l4-spot", overrides={"instance_termination_action": "STOP"})
    resources = evaluate(spec, PUBKEY)
    for inst in resources.of_type("compute/instance:Instance"):
        assert inst.inputs["scheduling"]["instanceTerminationAction"] == "STOP"
    assert check_resources([Resource(r.type, r.name, r.inputs, {}) for r in resources.resources]) == []


@pytest.mark.parametrize("stack", GKE_STACKS)
def test_gke_nodes_account_may_write_its_logs_and_metrics(stack):
    """GKE nodes need roles/container.defaultNodeServiceAccount on their own account."""
    spec, ev = evaluated_stack(stack)
    grants = [m.inputs for m in ev.of_type("projects/iAMMember:IAMMember")]
    node_role = [g for g in grants if g["role"] == "roles/container.defaultNodeServiceAccount"]
    assert len(node_role) == 1
    assert node_role[0]["member"] == f"serviceAccount:{service_account_id(spec)}@{spec.project}.iam.gserviceaccount.com"


def test_gke_names_stay_within_40_characters_for_the_longest_stack_names():
    long = load_stack("gke-l4", name="x" * 41)  # stack names may be 41 characters
    ev = evaluate(long)
    for r in ev.of_type("container/cluster:Cluster") + ev.of_type("container/nodePool:NodePool"):
        assert len(r.inputs["name"]) <= 40, r.inputs["name"]
    # distinct stacks keep distinct names after shortening
    other = evaluate(load_stack("gke-l4", name="x" * 40 + "y"))
    assert {r.inputs["name"] for r in other.of_type("container/cluster:Cluster")} != \
        {r.inputs["name"] for r in ev.of_type("container/cluster:Cluster")}
