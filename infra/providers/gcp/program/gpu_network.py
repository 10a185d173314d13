"""GpuNetworks: the VPCs a GPUDirect family's extra NICs attach to, as GCP's recipes declare them.

GPUDirect-TCPX / TCPXO (A3 High / A3 Mega): one VPC per GPU NIC, each with one subnet, MTU 8244
and a firewall rule that lets the stack's nodes reach each other on it. GPUDirect RDMA (A3 Ultra,
A4): a second gVNIC VPC (MTU 8896, same firewall) and one VPC made from the zone's RoCE network
profile with a subnet per GPU NIC: a RoCE VPC has implied allow-ingress rules and takes MRDMA
NICs only (https://cloud.google.com/vpc/docs/rdma-network-profiles), so it gets no firewall.
Also the COMPACT placement policy of the stack's VMs (compute.ResourcePolicy).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.providers.gcp.program.common import TYPE_PREFIX, child_opts, network_tag
from infra.providers.gcp.program.network import region_of
from infra.spec import gpu_networks
from infra.spec.gke_gpudirect import gvnic_subnet_name, gvnic_vpc_name, roce_subnet_name, roce_vpc_name
from infra.spec.cluster import ClusterSpec
from infra.spec.gpu_networks import GpuDirect

# The extra networks' ranges: one /24 each from 192.168.0.0/16, as GCP's GPUDirect guides number
# them (192.168.N.0/24); the RoCE subnets from the upper half.
EXTRA_RANGE = ipaddress.ip_network(gpu_networks.EXTRA_NETWORKS_RANGE)
ROCE_FIRST = 128


@dataclass(frozen=True)
class ExtraNic:
    """One NIC beyond nic0: its network, the subnet it attaches to (as resource paths, what a VM's
    network interface takes), its vNIC type, and the network's and subnet's names: a GKE node
    pool's additional node networks take names ("Name of the VPC where the additional interface
    belongs", container v1 AdditionalNodeNetworkConfig; terraform-provider-google
    resource_container_node_pool.go, additional_node_network_configs, ForceNew)."""

    network: pulumi.Output[str]
    subnet: pulumi.Output[str]
    nic_type: str
    network_name: pulumi.Output[str]
    subnet_name: pulumi.Output[str]


def stack_gpudirect(spec: ClusterSpec) -> GpuDirect | None:
    """The GPUDirect family of the stack's GPU nodes (one per stack, checked with the spec)."""
    for _, _, view in spec.groups():
        profile = gpu_networks.gpudirect(view.machine_type)
        if profile:
            return profile
    return None


def gvnic_vpc_count(profile: GpuDirect) -> int:
    """Ordinary VPCs beyond the stack's own: the other host NICs', and TCPX(O)'s GPU NICs'."""
    return profile.host_nics - 1 + (0 if profile.transport == "rdma" else profile.gpu_nics)


def gpu_network_names(spec: ClusterSpec) -> list[tuple[str, str]]:
    """(Compute collection, name) of everything GpuNetworks and compact_placement declare, in
    deletion order (what uses a network before it): `down --force` deletes exactly these."""
    profile = stack_gpudirect(spec)
    out: list[tuple[str, str]] = [("resourcePolicies", f"{spec.name}-placement")]
    if profile is None:
        return out
    vpcs = range(gvnic_vpc_count(profile))
    out += [("firewalls", f"{spec.name}-fw-gpunet-{i}") for i in vpcs]
    out += [("subnetworks", gvnic_subnet_name(spec.name, i)) for i in vpcs]
    if profile.transport == "rdma":
        out += [("subnetworks", roce_subnet_name(spec.name, i)) for i in range(profile.gpu_nics)]
        out.append(("networks", roce_vpc_name(spec.name)))
    return out + [("networks", gvnic_vpc_name(spec.name, i)) for i in vpcs]


def extra_subnet_cidr(index: int) -> str:
    return str(list(EXTRA_RANGE.subnets(new_prefix=24))[index])


def roce_profile(spec: ClusterSpec) -> str:
    """The zone's RoCE network profile, as a partial URL (Network.network_profile's docs)."""
    return f"projects/{spec.project}/global/networkProfiles/{spec.zone}-vpc-roce"


class GpuNetworks(pulumi.ComponentResource):
    def __init__(self, name: str, spec: ClusterSpec, profile: GpuDirect,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{TYPE_PREFIX}:GpuNetworks", name, None, opts)
        self._child = child_opts(self, opts)
        self._spec, self._name = spec, name
        self.networks: list[gcp.compute.Network] = []
        self.nics: list[ExtraNic] = []
        for i in range(gvnic_vpc_count(profile)):
            self.nics.append(self._gvnic_vpc(i, profile.mtu))
        if profile.transport == "rdma":
            self.nics += self._roce_vpc(profile)
        self.register_outputs({"networks": [n.id for n in self.networks]})

    def _gvnic_vpc(self, i: int, mtu: int) -> ExtraNic:
        spec, child = self._spec, self._child
        vpc = gcp.compute.Network(
            f"{self._name}-gpunet-{i}", name=gvnic_vpc_name(spec.name, i), project=spec.project,
            auto_create_subnetworks=False, mtu=mtu, opts=child)
        subnet = gcp.compute.Subnetwork(
            f"{self._name}-gpusub-{i}", name=gvnic_subnet_name(spec.name, i), project=spec.project,
            region=region_of(spec.zone or ""), network=vpc.id, ip_cidr_range=extra_subnet_cidr(i + 1),
            opts=child)
        tag = network_tag(spec)
        # Node to node on every network (the NCCL traffic), nothing from elsewhere.
        gcp.compute.Firewall(
            f"{self._name}-fw-gpunet-{i}", name=f"{spec.name}-fw-gpunet-{i}", project=spec.project,
            network=vpc.id, direction="INGRESS",
            allows=[gcp.compute.FirewallAllowArgs(protocol=p) for p in ("tcp", "udp", "icmp")],
            source_tags=[tag], target_tags=[tag], opts=child)
        self.networks.append(vpc)
        return ExtraNic(vpc.id, subnet.id, "GVNIC", vpc.name, subnet.name)

    def _roce_vpc(self, profile: GpuDirect) -> list[ExtraNic]:
        spec, child = self._spec, self._child
        vpc = gcp.compute.Network(
            f"{self._name}-rdma", name=roce_vpc_name(spec.name), project=spec.project,
            auto_create_subnetworks=False, mtu=profile.mtu, network_profile=roce_profile(spec), opts=child)
        self.networks.append(vpc)
        subnets = [gcp.compute.Subnetwork(
            f"{self._name}-rdmasub-{i}", name=roce_subnet_name(spec.name, i), project=spec.project,
            region=region_of(spec.zone or ""), network=vpc.id, ip_cidr_range=extra_subnet_cidr(ROCE_FIRST + i),
            opts=child) for i in range(profile.gpu_nics)]
        return [ExtraNic(vpc.id, s.id, "MRDMA", vpc.name, s.name) for s in subnets]


def compact_placement(spec: ClusterSpec, opts: pulumi.ResourceOptions) -> gcp.compute.ResourcePolicy | None:
    """One COMPACT (COLLOCATED) group placement policy for all of the stack's VMs, or None."""
    if spec.placement != "compact" or spec.kind != "vm":
        return None
    return gcp.compute.ResourcePolicy(
        f"{spec.name}-placement", name=f"{spec.name}-placement", project=spec.project,
        region=region_of(spec.zone or ""),
        group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(collocation="COLLOCATED"),
        opts=opts)
