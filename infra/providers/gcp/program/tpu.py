"""TpuVm: a single- or multi-host TPU slice (one V2Vm; a multi-host slice has one VM per host); or,
with tpu.queued, the queued resource that asks for it (created by trainctl: see queued_request)."""

from __future__ import annotations

import shlex
from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.spec import catalog
from infra.providers.gcp.program.common import TYPE_PREFIX, child_opts
from infra.spec.cluster import ClusterSpec
from infra.spec.cluster_sections import named_reservation


CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def tpu_name(spec: ClusterSpec) -> str:
    return f"{spec.name}-tpu"


class TpuVm(pulumi.ComponentResource):
    def __init__(self, name: str, spec: ClusterSpec, *, network: pulumi.Input[str],
                 subnet: pulumi.Input[str], tag: str, metadata: dict[str, str],
                 labels: dict[str, str], service_account: pulumi.Input[str],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{TYPE_PREFIX}:TpuVm", name, None, opts)
        child = child_opts(self, opts)
        assert spec.tpu is not None
        tpu = catalog.TPUS[spec.tpu.type]
        runtime = spec.tpu.runtime_version or tpu.runtime_versions[0]
        self.hosts = tpu.hosts
        self.vm = gcp.tpu.V2Vm(
            f"{name}-vm", name=tpu_name(spec), project=spec.project, zone=spec.zone,
            accelerator_type=tpu.name, runtime_version=runtime,
            network_config=gcp.tpu.V2VmNetworkConfigArgs(
                network=network, subnetwork=subnet, enable_external_ips=spec.network.external_ips),
            scheduling_config=gcp.tpu.V2VmSchedulingConfigArgs(spot=spec.spot) if spec.spot else None,
            # The full scope URL, as the provider's own examples send it: the provider passes TPU
            # scopes through unexpanded (resource_tpu_v2_vm.go; only instances expand aliases),
            # and the field is immutable, so a form the API answered differently would replace
            # the TPU on every `up`.
            service_account=gcp.tpu.V2VmServiceAccountArgs(email=service_account,
                                                            scopes=[CLOUD_PLATFORM_SCOPE]),
            metadata=metadata, labels=labels, tags=[tag], opts=child)
        self.register_outputs({"hosts": self.hosts})


def queued_resource_id(spec: ClusterSpec) -> str:
    """The queued resource and the node it grants share the name a direct TPU has."""
    return tpu_name(spec)


def queued_request(spec: ClusterSpec, *, network: str, subnet: str, tag: str, metadata: dict[str, str],
                   labels: dict[str, str], service_account: str) -> dict[str, Any]:
    """The Cloud TPU v2 queuedResources.create body (REST JSON) for the stack's TPU: the whole
    node, as TpuVm declares it (metadata with the SSH key, tags, labels, service account), which
    pulumi-gcp's V2QueuedResource cannot carry (its node takes only accelerator type, runtime,
    description and network config). Spot is the request's tier; a reservation is named by the
    request's reservationName, `any` by the node's schedulingConfig.reserved."""
    assert spec.tpu is not None and spec.tpu.queue_deadline_minutes is not None and spec.zone
    tpu = catalog.TPUS[spec.tpu.type]
    location = f"projects/{spec.project}/locations/{spec.zone}"
    named = named_reservation(spec.reservation)
    node: dict[str, Any] = {
        "acceleratorType": tpu.name, "runtimeVersion": spec.tpu.runtime_version or tpu.runtime_versions[0],
        "networkConfig": {"network": network, "subnetwork": subnet,
                          "enableExternalIps": spec.network.external_ips},
        "serviceAccount": {"email": service_account, "scope": [CLOUD_PLATFORM_SCOPE]},
        "metadata": metadata, "labels": labels, "tags": [tag]}
    # Spot: the request's tier and the node's scheduling both say so (Google's own spot queued
    # resource sample, tpu_queued_resources_create_spot, sets only the node's).
    if spec.spot or spec.reservation == "any":
        node["schedulingConfig"] = {"spot": True} if spec.spot else {"reserved": True}
    body: dict[str, Any] = {
        "tpu": {"nodeSpec": [{"parent": location, **_names(spec), "node": node}]},
        # Google stops waiting when trainctl does, even if trainctl is killed meanwhile.
        "queueingPolicy": {"validUntilDuration": f"{round(spec.tpu.queue_deadline_minutes * 60)}s"}}
    if spec.spot:
        body["spot"] = {}
    if named:
        body["reservationName"] = f"{location}/reservations/{named}"
    return body


def _names(spec: ClusterSpec) -> dict[str, Any]:
    """One slice: its node id. Several: the v2 API's multisliceParams (v2alpha1 calls it
    multiNodeParams), which names the nodes `<prefix>-0` .. `<prefix>-<count-1>`."""
    assert spec.tpu is not None
    if spec.tpu.slices == 1:
        return {"nodeId": tpu_name(spec)}
    return {"multisliceParams": {"nodeCount": spec.tpu.slices, "nodeIdPrefix": tpu_name(spec)}}


def slice_node_ids(spec: ClusterSpec) -> list[str]:
    """The TPU nodes the stack's request grants, slice 0 first."""
    assert spec.tpu is not None
    if spec.tpu.slices == 1:
        return [tpu_name(spec)]
    return [f"{tpu_name(spec)}-{i}" for i in range(spec.tpu.slices)]


def gcloud_command(spec: ClusterSpec, body: dict[str, Any]) -> str:
    """The same request as `gcloud compute tpus queued-resources create` flags, for `pulumi up`
    users (`gcloud alpha` where a reservation is named: only alpha has --reservation)."""
    node = body["tpu"]["nodeSpec"][0]["node"]
    net = node["networkConfig"]
    multislice = body["tpu"]["nodeSpec"][0].get("multisliceParams")
    names = [f"--node-count={multislice['nodeCount']}", f"--node-prefix={multislice['nodeIdPrefix']}"] \
        if multislice else [f"--node-id={tpu_name(spec)}"]
    flags = [f"--zone={spec.zone}", f"--project={spec.project}", *names,
             f"--accelerator-type={node['acceleratorType']}", f"--runtime-version={node['runtimeVersion']}",
             f"--network={net['network']}", f"--subnetwork={net['subnetwork']}",
             f"--service-account={node['serviceAccount']['email']}", f"--scopes={CLOUD_PLATFORM_SCOPE}",
             "--metadata=" + ",".join(f"{k}={v}" for k, v in node["metadata"].items()),
             "--labels=" + ",".join(f"{k}={v}" for k, v in node["labels"].items()),
             f"--tags={','.join(node['tags'])}",
             f"--valid-until-duration={body['queueingPolicy']['validUntilDuration']}"]
    flags += [] if net["enableExternalIps"] else ["--internal-ips"]
    flags += ["--spot"] if "spot" in body else []
    flags += ["--reserved"] if node.get("schedulingConfig", {}).get("reserved") else []
    reservation = body.get("reservationName")
    flags += [f"--reservation={reservation.rsplit('/', 1)[-1]}"] if reservation else []
    track = "gcloud alpha" if reservation else "gcloud"
    return " ".join([f"{track} compute tpus queued-resources create {queued_resource_id(spec)}",
                     *(shlex.quote(f) for f in flags)])
