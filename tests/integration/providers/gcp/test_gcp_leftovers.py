"""`down --force` after a failed destroy, through the real Compute and Storage clients against a
simulated project: the network goes by the names the program gives it (asked again while VMs
still use it, within a bound), an ephemeral stack's bucket goes with every object only if it
carries the stack's labels, and a named stack's bucket is not touched. What it names without
asking a project: tests/unit/providers/gcp/test_leftover_names.py."""

from __future__ import annotations

from typing import Any

import pytest

from infra.errors import ProvisionError
from infra.providers.gcp import leftovers
from infra.providers.gcp.program.network import region_of
from infra.providers.gcp.program.storage import bucket_name
from infra.spec.cluster import ClusterSpec
from tests.fakes.sim_compute import instance_body
from tests.fakes.sim_stacks import Project, gcp, make_gcp, simulated_gcp  # noqa: F401 (fixtures)

OURS = {"managed-by": "trainctl", "trainctl-stack": "gpu-t4x2"}


def bucket_with(project: Project, name: str, labels: dict[str, str], objects: int) -> None:
    bucket = project.storage().bucket(name)
    bucket.labels = labels
    bucket.create()
    for i in range(objects):
        bucket.blob(f"run/checkpoints/ckpt-{i}.pt").upload_from_string(b"weights")


def objects_in(project: Project, name: str) -> list[str]:
    return [blob.name for blob in project.storage().list_blobs(name)]


def test_an_ephemeral_stacks_bucket_goes_with_all_its_objects(gcp: Project) -> None:
    spec = gcp.stack("gpu-t4x2", ephemeral=True)
    bucket_with(gcp, bucket_name(spec), OURS, objects=5)
    bucket_with(gcp, f"{gcp.id}-someone-else", {}, objects=1)
    leftovers.sweep_bucket(spec, gcp.progress)
    assert gcp.bucket(bucket_name(spec)) is None
    assert objects_in(gcp, f"{gcp.id}-someone-else") == ["run/checkpoints/ckpt-0.pt"]
    assert gcp.said == [f"deleted bucket {bucket_name(spec)} and its 5 object(s)"]


def test_a_bucket_without_the_stacks_labels_is_left_alone(gcp: Project) -> None:
    spec = gcp.stack("gpu-t4x2", ephemeral=True)
    bucket_with(gcp, bucket_name(spec), {**OURS, "trainctl-stack": "other"}, objects=1)
    leftovers.sweep_bucket(spec, gcp.progress)
    assert objects_in(gcp, bucket_name(spec)) == ["run/checkpoints/ckpt-0.pt"]
    assert "does not carry stack gpu-t4x2's labels: left alone" in gcp.said[0]


def test_a_named_stacks_bucket_is_kept_and_a_missing_one_is_nothing_to_do(gcp: Project) -> None:
    named = gcp.stack("gpu-t4x2")
    bucket_with(gcp, bucket_name(named), OURS, objects=1)
    leftovers.sweep_bucket(named, gcp.progress)  # kept on down: `down` names the command that deletes it
    assert objects_in(gcp, bucket_name(named)) == ["run/checkpoints/ckpt-0.pt"]
    gone = gcp.stack("gpu-t4x2", name="gone", ephemeral=True)
    leftovers.sweep_bucket(gone, gcp.progress)
    assert gcp.said == []


def in_use_subnetwork(project: Project, spec: ClusterSpec) -> None:
    """The stack's network with a VM in it that nothing is deleting."""
    assert spec.zone
    project.network(f"{spec.name}-vpc", region_of(spec.zone), subnet=f"{spec.name}-subnet")
    project.ok("POST", project.compute(f"zones/{spec.zone}/instances"),
               instance_body("still-here", zone=spec.zone, subnet=f"{spec.name}-subnet", project=project.id))


def test_a_network_still_in_use_past_the_bound_is_named_with_what_to_do(make_gcp: Any) -> None:
    project = make_gcp(services=["compute.googleapis.com"])
    spec = project.stack("gpu-t4x2")
    in_use_subnetwork(project, spec)
    with pytest.raises(ProvisionError, match=rf"subnetwork {spec.name}-subnet is still in use .*"
                                             rf"run `trainctl down --stack {spec.name} --force` again"):
        leftovers.sweep_network(spec, project.progress, timeout=0.3, poll=0.05)
    assert any("still in use (its VMs are going): asking again" in line for line in project.said)
    assert project.names("networks") == {f"{spec.name}-vpc"}
    assert project.names("subnetworks", region_of(spec.zone or "")) == {f"{spec.name}-subnet"}


def test_force_down_deletes_a_gpudirect_stacks_extra_networks_and_placement_policy(make_gcp: Any) -> None:
    project = make_gcp(services=["compute.googleapis.com"])
    spec = project.stack("gpu-a4-x2")
    assert spec.zone
    region = region_of(spec.zone)
    project.network(f"{spec.name}-vpc", region, subnet=f"{spec.name}-subnet")
    project.network(f"{spec.name}-gpunet-0", region, cidr="192.168.1.0/24", subnet=f"{spec.name}-gpusub-0")
    project.ok("POST", project.compute("global/networks"), {"name": f"{spec.name}-rdma", "autoCreateSubnetworks": False})
    for i in range(8):
        project.ok("POST", project.compute(f"regions/{region}/subnetworks"),
                   {"name": f"{spec.name}-rdmasub-{i}", "ipCidrRange": f"192.168.{128 + i}.0/24",
                    "network": f"projects/{project.id}/global/networks/{spec.name}-rdma"})
    project.ok("POST", project.compute("global/firewalls"),
               {"name": f"{spec.name}-fw-gpunet-0", "network": f"projects/{project.id}/global/networks/{spec.name}-gpunet-0",
                "allowed": [{"IPProtocol": "tcp"}], "sourceTags": ["t"], "targetTags": ["t"]})
    project.ok("POST", project.compute(f"regions/{region}/resourcePolicies"),
               {"name": f"{spec.name}-placement", "groupPlacementPolicy": {"collocation": "COLLOCATED"}})
    leftovers.sweep_network(spec, project.progress, timeout=30, poll=0.05)
    assert project.names("networks") == set()
    assert project.names("subnetworks", region) == set()
    assert project.names("firewalls") == set()
    assert f"deleted resource policy {spec.name}-placement" in project.said
