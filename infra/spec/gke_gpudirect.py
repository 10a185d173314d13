"""The GKE side of a GPUDirect node pool: which extra network each pod interface attaches to, and
the multi-networking objects (`networking.gke.io/v1` GKENetworkParamSet + Network, one pair per
extra network) that let a pod name those networks. Pure declaration: the GCP provider creates the
objects on the cluster after `up`, the GKE launcher names them in the Job's pod annotations.

Sources, each fact checked there:
- GKENetworkParamSet `spec.vpc`, `spec.vpcSubnet`, `spec.deviceMode` (NetDevice for gVNIC
  networks, RDMA for a RoCE network's subnets); Network `spec.type: Device` with `parametersRef`
  {group networking.gke.io, kind GKENetworkParamSet, name}: GKE's GPUDirect guides
  (gpu-bandwidth-gpudirect-tcpx, A3 Ultra / A4 on GKE), Cluster Toolkit's multi-network modules,
  kubernetes/cloud-provider-gcp's GKENetworkParamSet controller. Both kinds are cluster-scoped.
- Interface numbering: eth0 is the pod's default network; TCPX(O) GPU NICs are eth1..eth8;
  A3 Ultra / A4 put the second gVNIC on eth1 and the eight RDMA NICs on eth2..eth9
  (container-engine-accelerators gpudirect-tcpxo/nccl-test-latest.yaml, gpudirect-rdma/nccl-test.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from infra.spec import gpu_networks
from infra.spec.cluster import ClusterSpec
from infra.spec.gpu_networks import GpuDirect

GROUP = "networking.gke.io"
API_VERSION = f"{GROUP}/v1"
DEFAULT_INTERFACE = "eth0"
DEFAULT_NETWORK = "default"  # the pod network GKE makes with multi-networking


# The GCP names of the extra networks (the program declares them; `down --force` sweeps them).
def gvnic_vpc_name(stack: str, index: int) -> str:
    return f"{stack}-gpunet-{index}"


def gvnic_subnet_name(stack: str, index: int) -> str:
    return f"{stack}-gpusub-{index}"


def roce_vpc_name(stack: str) -> str:
    return f"{stack}-rdma"


def roce_subnet_name(stack: str, index: int) -> str:
    return f"{stack}-rdmasub-{index}"


@dataclass(frozen=True)
class PodNetwork:
    """One extra network a pod attaches to: the Network object's name (also its parameter set's),
    the VPC and subnet it stands for, how the NIC is handed to the pod, and the pod's interface."""

    name: str
    vpc: str
    subnet: str
    device_mode: Literal["NetDevice", "RDMA"]
    interface: str


def pool_gpudirect(spec: ClusterSpec) -> GpuDirect | None:
    """The GPUDirect family of a GKE stack's pool, or None (no GPUDirect, or not GKE)."""
    return gpu_networks.gpudirect(spec.machine_type) if spec.kind == "gke" else None


def pod_networks(spec: ClusterSpec) -> list[PodNetwork]:
    """The extra networks of the pool's pods, in interface order (eth1 first)."""
    profile = pool_gpudirect(spec)
    if profile is None:
        return []
    gvnic_vpcs = profile.host_nics - 1 + (0 if profile.transport == "rdma" else profile.gpu_nics)
    out = [PodNetwork(gvnic_vpc_name(spec.name, i), gvnic_vpc_name(spec.name, i), gvnic_subnet_name(spec.name, i),
                      "NetDevice", f"eth{i + 1}") for i in range(gvnic_vpcs)]
    if profile.transport == "rdma":
        out += [PodNetwork(roce_subnet_name(spec.name, i), roce_vpc_name(spec.name), roce_subnet_name(spec.name, i),
                           "RDMA", f"eth{gvnic_vpcs + 1 + i}") for i in range(profile.gpu_nics)]
    return out


def param_set(network: PodNetwork, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "GKENetworkParamSet",
            "metadata": {"name": network.name, "labels": labels},
            "spec": {"vpc": network.vpc, "vpcSubnet": network.subnet, "deviceMode": network.device_mode}}


def network_object(network: PodNetwork, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "Network",
            "metadata": {"name": network.name, "labels": labels},
            "spec": {"type": "Device", "parametersRef": {
                "group": GROUP, "kind": "GKENetworkParamSet", "name": network.name}}}


def network_objects(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Every parameter set, then every Network (a Network names its set): the creation order;
    deletion goes the other way."""
    labels = {"app.kubernetes.io/managed-by": "trainctl", "trainctl-stack": spec.name}
    networks = pod_networks(spec)
    return [param_set(n, labels) for n in networks] + [network_object(n, labels) for n in networks]


def interfaces_annotation(networks: list[PodNetwork]) -> list[dict[str, str]]:
    """The value of `networking.gke.io/interfaces`: the default network on eth0, then every extra one."""
    return [{"interfaceName": DEFAULT_INTERFACE, "network": DEFAULT_NETWORK},
            *({"interfaceName": n.interface, "network": n.name} for n in networks)]
