"""A GCP stack's life through the real realizer (infra/providers/gcp/realizer.py), the Pulumi Automation API
and the simulator's `pulumi`, which runs trainctl's own program and applies it to a simulated
project: what `up` makes, what `down` leaves, a second `up` after a `down` (the named stack's kept
bucket adopted), an `up` after the expiry has passed, `down --force` after a failed destroy, and
the refusals that come before anything is created."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from namespace_nodes import keys
from infra.errors import ConfigError
from infra.providers.gcp import private_endpoints, reaper, realizer
from infra.providers.gcp.program.network import region_of
from infra.providers.gcp.program.storage import bucket_name
from infra.spec.stack_config import REPO_ROOT
from infra.providers.stack_home import state_dir
from tests.fakes.sim_compute import instance_body
from tests.fakes.sim_stacks import Project, gcp, make_gcp, nat_ip, simulated_gcp  # noqa: F401 (fixtures)


def stacks_in_backend(project: Project) -> list[str]:
    """The stacks the Pulumi backend holds, as `pulumi stack ls` lists them."""
    workspace = auto.LocalWorkspace(work_dir=str(project.root))
    return [s.name for s in workspace.list_stacks()]


def test_a_named_stack_comes_up_goes_down_and_comes_up_again_with_its_kept_bucket(gcp: Project) -> None:
    spec = gcp.stack("gpu-t4x2")
    node, bucket = f"{spec.name}-node-0", bucket_name(spec)
    inventory = realizer.up(spec, gcp.progress)

    vm = gcp.instance(node)
    assert vm is not None and vm["status"] == "RUNNING"
    assert {"managed-by": "trainctl", "trainctl-stack": spec.name}.items() <= vm["labels"].items()
    public = keys.read_public_key(state_dir(spec.name) / "keys" / "id_ed25519")
    ssh_keys = next(i["value"] for i in vm["metadata"]["items"] if i["key"] == "ssh-keys")
    assert public.split()[1] in ssh_keys  # the nodes admit the key trainctl made for the stack
    assert [(n.name, n.ssh_host, n.host_keys) for n in inventory.nodes] == [
        (node, nat_ip(vm), (gcp.host_key(node),))]  # pinned from guest attributes, never from the network
    assert Path(inventory.known_hosts).read_text().splitlines() == [f"{nat_ip(vm)} {gcp.host_key(node)}"]
    assert inventory.bucket_uri == f"gs://{bucket}" and inventory.kubeconfig is None
    gcp.storage().bucket(bucket).blob("run/ckpt-1.pt").upload_from_string(b"weights")
    created = gcp.bucket(bucket)["timeCreated"]  # type: ignore[index]

    # That `down` removes all but the kept bucket, and the Pulumi stack and trainctl's state
    # with it, is the realizer contract's (tests/contracts/test_realizer_contract.py).
    assert realizer.down(spec.name, progress=gcp.progress) is True
    gcp.next_command()
    assert [b.name for b in gcp.storage().list_blobs(bucket)] == ["run/ckpt-1.pt"]  # kept, with its checkpoints
    assert f"delete it with `gcloud storage rm -r gs://{bucket}`" in gcp.said[-1]
    assert (gcp.root / "stacks" / f"Pulumi.{spec.name}.yaml").is_file()  # the user's stack file stays

    gcp.said.clear()
    again = realizer.up(spec, gcp.progress)
    assert any(f"adopting bucket gs://{bucket}" in line for line in gcp.said)
    assert gcp.bucket(bucket)["timeCreated"] == created  # type: ignore[index]
    assert [b.name for b in gcp.storage().list_blobs(bucket)] == ["run/ckpt-1.pt"]
    assert again.nodes[0].host_keys == (gcp.host_key(node),)
    assert realizer.down(spec.name, progress=gcp.progress) is True
    gcp.next_command()
    assert gcp.instances() == {} and gcp.bucket(bucket) is not None


def test_an_up_after_the_expiry_has_passed_labels_the_nodes_with_a_new_one(gcp: Project) -> None:
    spec = gcp.stack("gpu-t4x2", ttl_hours=1 / 3600)  # one second
    node = f"{spec.name}-node-0"
    realizer.up(spec, gcp.progress)
    first = gcp.instance(node)
    assert first is not None and [e.name for e in reaper.find_expired(gcp.id)] == [node]

    later = time.time()
    realizer.up(spec, gcp.progress)
    vm = gcp.instance(node)
    assert vm is not None and vm["id"] == first["id"]  # relabelled in place, not recreated
    assert int(vm["labels"]["trainctl-expires"]) > later
    assert reaper.find_expired(gcp.id, now=later) == []  # the reap that follows leaves it alone


def test_a_gke_stacks_kubeconfig_is_written_0600_with_the_clusters_endpoint(
        gcp: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = tmp_path / "bin" / "gke-gcloud-auth-plugin"  # the kubeconfig's credential helper
    plugin.parent.mkdir()
    plugin.write_text("#!/bin/sh\nexit 0\n")
    plugin.chmod(0o755)
    monkeypatch.setenv("PATH", f"{plugin.parent}{os.pathsep}{os.environ['PATH']}")
    spec = gcp.stack("gke-l4")
    inventory = realizer.up(spec, gcp.progress)

    cluster = gcp.ok("GET", f"/v1/projects/{gcp.id}/locations/{spec.zone}/clusters/{spec.name}-gke")
    assert inventory.kubeconfig is not None
    path = Path(inventory.kubeconfig)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    kubeconfig = yaml.safe_load(path.read_text())  # the secret output in plain text, not "[secret]"
    assert kubeconfig["clusters"][0]["cluster"] == {
        "server": f"https://{cluster['endpoint']}",
        "certificate-authority-data": cluster["masterAuth"]["clusterCaCertificate"]}
    # the pods' identity reaches the manifests: without it their bucket writes get 403
    account = inventory.gke_service_account
    assert account and gcp.ok("GET", f"/v1/projects/{gcp.id}/serviceAccounts/{account}")["email"] == account


def test_a_gke_stack_with_the_longest_name_comes_up_with_names_gke_takes(
        gcp: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stack names may have 41 characters; GKE refuses cluster and node pool names over 40."""
    plugin = tmp_path / "bin" / "gke-gcloud-auth-plugin"
    plugin.parent.mkdir()
    plugin.write_text("#!/bin/sh\nexit 0\n")
    plugin.chmod(0o755)
    monkeypatch.setenv("PATH", f"{plugin.parent}{os.pathsep}{os.environ['PATH']}")
    spec = gcp.stack("gke-l4", name="a-stack-name-of-the-longest-kind-allowed1")
    assert len(spec.name) == 41
    realizer.up(spec, gcp.progress)
    clusters = gcp.ok("GET", f"/v1/projects/{gcp.id}/locations/-/clusters")["clusters"]
    assert [len(c["name"]) <= 40 for c in clusters] == [True]
    pools = gcp.ok("GET", f"/v1/projects/{gcp.id}/locations/{spec.zone}/clusters/{clusters[0]['name']}/nodePools")
    assert all(len(p["name"]) <= 40 for p in pools["nodePools"])
    assert realizer.down(spec.name, progress=gcp.progress) is True


NO_FIREWALLS_PACK = """\
from pulumi_policy import EnforcementLevel, PolicyPack, ResourceValidationPolicy


def no_firewalls(args, report_violation):
    if args.resource_type == "gcp:compute/firewall:Firewall":
        report_violation("this project takes no firewall")


PolicyPack("no-firewalls", [ResourceValidationPolicy(name="no-firewalls", description="no firewalls",
                                                     validate=no_firewalls)],
           enforcement_level=EnforcementLevel.MANDATORY)
"""


def test_up_runs_under_the_policy_packs_and_a_mandatory_violation_creates_nothing_of_it(
        gcp: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`up` hands the engine trainctl's pack (policy/); every stack passes it (the spec refuses
    what it refuses first), so a pack of the test's own shows the engine enforcing it."""
    assert realizer.policy_packs() == [str(REPO_ROOT / "policy")]
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "PulumiPolicy.yaml").write_text(f"runtime:\n  name: python\n  options:\n"
                                            f"    virtualenv: {Path(sys.prefix)}\nversion: 0.0.1\n")
    (pack / "__main__.py").write_text(NO_FIREWALLS_PACK)
    monkeypatch.setattr(realizer, "policy_packs", lambda: [str(pack)])
    with pytest.raises(auto.errors.CommandError, match="this project takes no firewall"):
        realizer.up(gcp.stack("gpu-t4x2"), gcp.progress)
    assert gcp.names("firewalls") == set() and gcp.instances() == {}


def test_a_local_backend_without_passphrase_is_refused_before_anything_is_created(
        gcp: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    with pytest.raises(ConfigError, match="PULUMI_CONFIG_PASSPHRASE"):
        realizer.up(gcp.stack("gpu-t4x2"), gcp.progress)
    assert gcp.operations() == [] and stacks_in_backend(gcp) == []


def test_a_stack_pulumi_never_made_is_not_up(gcp: Project) -> None:
    with pytest.raises(ConfigError, match="stack 'gpu-t4x2' is not up: run `trainctl up --stack gpu-t4x2`"):
        realizer.inventory("gpu-t4x2")
    assert stacks_in_backend(gcp) == [] and gcp.operations() == []


def test_down_force_after_a_failed_destroy_sweeps_the_stacks_labels_and_its_network_by_name(
        gcp: Project) -> None:
    spec = gcp.stack("gpu-t4x2")
    assert spec.zone
    region = region_of(spec.zone)
    realizer.up(spec, gcp.progress)
    # A VM that carries the stack's labels but is not in its state (made beside it, e.g. from its
    # node's instance template) holds the stack's subnetwork: `pulumi destroy` cannot delete it.
    ours = {"managed-by": "trainctl", "trainctl-stack": spec.name}
    gcp.ok("POST", gcp.compute(f"zones/{spec.zone}/instances"), instance_body(
        f"{spec.name}-extra", zone=spec.zone, subnet=f"{spec.name}-subnet", labels=ours, project=gcp.id))
    gcp.network("another-stack-vpc", region, cidr="10.130.0.0/20")
    gcp.ok("POST", gcp.compute(f"zones/{spec.zone}/instances"), instance_body(
        "another-stacks-vm", zone=spec.zone, subnet="another-stack-vpc-subnet", project=gcp.id,
        labels={**ours, "trainctl-stack": "another-stack"}))

    with pytest.raises(auto.errors.CommandError, match="is already being used by"):
        realizer.down(spec.name, force=False, progress=gcp.progress)
    gcp.said.clear()
    assert realizer.down(spec.name, force=True, progress=gcp.progress) is True
    gcp.next_command()

    assert set(gcp.instances()) == {"another-stacks-vm"}  # the stack's VMs went, nothing else
    assert gcp.names("networks") == {"another-stack-vpc"}  # its network by its names, after the VMs
    assert gcp.names("subnetworks", region) == {"another-stack-vpc-subnet"}
    assert any("deleting what carries the stack's label" in line for line in gcp.said)
    assert f"deleted network {spec.name}-vpc" in gcp.said
    assert any("gcloud artifacts repositories delete" in line for line in gcp.said)  # no client here: named
    assert stacks_in_backend(gcp) == [] and (gcp.root / "stacks" / f"Pulumi.{spec.name}.yaml").is_file()


def test_after_a_down_released_the_simulator_the_same_process_reaches_it_again(make_gcp: Any) -> None:
    make_gcp(services=["compute.googleapis.com"])
    state_dir("gpu-t4x2").mkdir(parents=True)
    private_endpoints.record("gpu-t4x2")  # as `up` records a simulated stack
    private_endpoints.release()  # as `down` ends
    assert realizer.instance_status("gpu-t4x2", ["gpu-t4x2-node-0"]) == {"gpu-t4x2-node-0": None}



def test_a_fresh_project_refuses_up_naming_the_gpu_quota_then_comes_up_once_it_is_raised(
        make_gcp: Any) -> None:
    """What `gcloud projects create` gives: the default services only (no Compute, no Resource
    Manager) and GPUS_ALL_REGIONS 0. `up` refuses before anything billable exists, naming the
    quota and the command that raises it; with the quota raised, the stack comes up (its
    program enables Resource Manager before the APIs whose enabling reads the project)."""
    gcp = make_gcp(template="fresh")
    spec = gcp.stack("gpu-t4x2")
    with pytest.raises(ConfigError) as refused:
        realizer.up(spec, gcp.progress)
    assert "GPUS_ALL_REGIONS project-wide: limit 0" in str(refused.value)
    assert f"gcloud quotas preferences create --service=compute.googleapis.com --project={gcp.id}" in str(refused.value)
    assert gcp.instances() == {} and gcp.names("networks") == set() and gcp.bucket(bucket_name(spec)) is None
    gcp.admin("PATCH", "quotas", {"global": {"GPUS_ALL_REGIONS": 2}, "us-central1": {"NVIDIA_T4_GPUS": 2}})
    inventory = realizer.up(spec, gcp.progress)
    assert [n.name for n in inventory.nodes] == [f"{spec.name}-node-0"]
    assert realizer.down(spec.name, progress=gcp.progress) is True
