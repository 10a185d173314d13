"""Network: a VPC with one subnet and least-privilege firewall rules.

Ingress is closed by the VPC's implied deny; two rules open exactly what training needs:
SSH from the configured source ranges, and all traffic between the cluster's own nodes (the
launchers' fixed ports among it: torchrun's rendezvous 29400, TF_CONFIG's 2222, JAX's coordinator
8482, MEGASCALE's 8081; and the collectives' ephemeral ones, which gloo, NCCL and JAX pick at run
time, so no narrower rule would do).
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.providers.gcp.program.common import TYPE_PREFIX, child_opts, network_tag
from infra.spec import gpu_networks
from infra.spec.catalog import region_of
from infra.spec.cluster import ClusterSpec


class Network(pulumi.ComponentResource):
    def __init__(self, name: str, spec: ClusterSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{TYPE_PREFIX}:Network", name, None, opts)
        child = child_opts(self, opts)
        assert spec.zone
        region = region_of(spec.zone)
        tag = network_tag(spec)
        self.tag = tag
        # A GPUDirect family's nic0 network takes the MTU its recipes give all of its networks.
        profile = gpu_networks.gpudirect(spec.machine_type)
        self.network = gcp.compute.Network(
            f"{name}-vpc", name=f"{spec.name}-vpc", project=spec.project,
            auto_create_subnetworks=False, mtu=profile.mtu if profile else None, opts=child)
        self.subnet = gcp.compute.Subnetwork(
            f"{name}-subnet", name=f"{spec.name}-subnet", project=spec.project, region=region,
            network=self.network.id, ip_cidr_range=spec.network.subnet_cidr,
            private_ip_google_access=True, opts=child)
        self.firewalls = []
        if spec.ssh.source_ranges:
            self.firewalls.append(gcp.compute.Firewall(
                f"{name}-fw-ssh", name=f"{spec.name}-fw-ssh", project=spec.project,
                network=self.network.id, direction="INGRESS",
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
                source_ranges=list(spec.ssh.source_ranges), target_tags=[tag], opts=child))
        self.firewalls.append(gcp.compute.Firewall(
            f"{name}-fw-internal", name=f"{spec.name}-fw-internal", project=spec.project,
            network=self.network.id, direction="INGRESS",
            allows=[gcp.compute.FirewallAllowArgs(protocol=p) for p in ("tcp", "udp", "icmp")],
            source_tags=[tag], target_tags=[tag], opts=child))
        if spec.network.nat:
            router = gcp.compute.Router(
                f"{name}-router", name=f"{spec.name}-router", project=spec.project,
                region=region, network=self.network.id, opts=child)
            gcp.compute.RouterNat(
                f"{name}-nat", name=f"{spec.name}-nat", project=spec.project, region=region,
                router=router.name, nat_ip_allocate_option="AUTO_ONLY",
                source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES", opts=child)
        self.register_outputs({"network": self.network.id, "subnet": self.subnet.id})
