"""GPU-to-GPU networking of the machine types GPUDirect serves: how many NICs each has and on which
kind of network, the MTU GCP's recipes give those networks, the disks the family takes, what a
node needs installed for NCCL to use the GPU NICs, and NCCL's environment.

Data only, read by the spec (placement, disks), the GCP program (networks, NICs), bootstrap (the
plugin) and the launchers (NCCL's environment). Sources, each fact checked there:
- NICs and transports: https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth
  ("A3 Mega ... 8+1", "A3 High ... 4+1"; "A4 and A3 Ultra ... eight CX7 NICs and two gVNICs";
  "secondary NICs (up to eight on A3 Mega and up to four on A3 High), each ... 200 Gbps";
  the overview table: A3 High 1,000 Gbps GPUDirect-TCPX, A3 Mega 1,800 Gbps GPUDirect-TCPXO,
  A3 Ultra and A4 3,600 Gbps GPUDirect RDMA).
- RDMA network profile (`<zone>-vpc-roce`, MRDMA NICs only, 8896 MTU, the VM's other NICs on
  ordinary VPCs): https://cloud.google.com/vpc/docs/rdma-network-profiles
- MTU 8244 for the TCPX/TCPXO networks: XPK's `networks create ... --mtu=8244` and GKE's
  GPUDirect-TCPX(O) guide; 8896 for A4/A3 Ultra's gVNIC networks: Cluster Toolkit's
  examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml (net-0, net-1, a RoCE VPC with 8 subnets).
- Hyperdisk-only families (A4, A3 Ultra): the same blueprint boots them on hyperdisk-balanced.
- Plugins and NCCL settings: Cluster Toolkit's a3-highgpu-8g / a3-megagpu-8g nccl-tests scripts
  (TCPX: NCCL_NET=GPUDirectTCPX_v7 and the receive-data-path manager; TCPXO: nccl-env-profile.sh
  with NCCL_FASTRAK_*), GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpxo release
  pins, and a4high-vm.yaml's nccl-gib package and /etc/environment block (RDMA).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from infra.spec import catalog, gpu_host
from infra.spec.gpu_host import HostSetup

Transport = Literal["tcpx", "tcpxo", "rdma"]

_AR = "us-docker.pkg.dev/gce-ai-infra"
# The GPU NICs' interface names under Ubuntu's predictable naming (the recipes' NCCL_*_IFNAME).
_A3_HIGH_GPU_IFACES = "enp6s0,enp12s0,enp134s0,enp140s0"
_A3_MEGA_GPU_IFACES = "enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0"
_A3_CTRL_IFACE = "enp0s12"
# By transport, for the GKE pods that name the same NICs eth0..ethN (trainctl/launchers/gke/gpudirect.py).
VM_GPU_INTERFACES = {"tcpx": _A3_HIGH_GPU_IFACES, "tcpxo": _A3_MEGA_GPU_IFACES}
VM_CTRL_INTERFACE = _A3_CTRL_IFACE


def _library_path(directory: str) -> str:
    """The plugin's libraries first on the loader's path (the recipes' LD_LIBRARY_PATH)."""
    return f'export LD_LIBRARY_PATH={directory}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}'


@dataclass(frozen=True)
class NcclSetup:
    """What bootstrap installs once per node (as root) and what every rank's environment gets."""

    plugin: str
    install: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    # Shell lines run before each rank starts (a profile the plugin ships, sourced).
    env_script: tuple[str, ...] = ()
    # What the host needs first (a kernel module, device nodes), run as root before `install`.
    host: HostSetup | None = None


@dataclass(frozen=True)
class GpuDirect:
    """One machine type's GPU networking. `host_nics` are gVNICs on ordinary VPCs, each on a VPC of
    its own, the first being the stack's network (SSH, storage); `gpu_nics` carry GPU traffic."""

    machine_type: str
    name: str
    transport: Transport
    host_nics: int
    gpu_nics: int
    gpu_nic_type: Literal["GVNIC", "MRDMA"]
    mtu: int
    line_rate_gbps: int
    hyperdisk_only: bool
    nccl: NcclSetup

    @property
    def total_nics(self) -> int:
        return self.host_nics + self.gpu_nics

    @property
    def gpu_vpcs(self) -> int:
        """TCPX/TCPXO: one VPC per GPU NIC. RDMA: one RoCE VPC with a subnet per GPU NIC."""
        return 1 if self.transport == "rdma" else self.gpu_nics

    @property
    def extra_vpcs(self) -> int:
        """VPCs besides the stack's own: the other host NICs' and the GPU NICs'."""
        return self.host_nics - 1 + self.gpu_vpcs


_TCPX = NcclSetup(
    plugin="GPUDirect-TCPX NCCL plugin + receive-data-path manager",
    install=(
        f"docker run --rm -v /var/lib:/var/lib {_AR}/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.6_2023_10_06"
        " install --install-nccl",
        "mkdir -p /run/tcpx && (docker rm -f receive-datapath-manager >/dev/null 2>&1 || true) && "
        "docker run --detach --name receive-datapath-manager --restart unless-stopped --privileged "
        "--cap-add=NET_ADMIN --network=host --gpus all --volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64 "
        "--volume /run/tcpx:/run/tcpx --entrypoint /tcpgpudmarxd/build/app/tcpgpudmarxd "
        f"{_AR}/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.9 --gpu_nic_preset a3vm --gpu_shmem_type fd "
        "--uds_path /run/tcpx --setup_param '--verbose 128 2 0'",
    ),
    env={"NCCL_NET": "GPUDirectTCPX_v7", "NCCL_SOCKET_IFNAME": _A3_CTRL_IFACE,
         "NCCL_GPUDIRECTTCPX_CTRL_DEV": _A3_CTRL_IFACE,
         "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": _A3_HIGH_GPU_IFACES,
         "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": "/run/tcpx", "NCCL_CROSS_NIC": "0",
         "NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_NSOCKS_PERTHREAD": "4",
         "NCCL_SOCKET_NTHREADS": "1", "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
         "NCCL_P2P_NET_CHUNKSIZE": "524288", "NCCL_P2P_PCI_CHUNKSIZE": "524288"},
    env_script=(_library_path("/var/lib/tcpx/lib64"),),
)

_TCPXO = NcclSetup(
    plugin="GPUDirect-TCPXO NCCL plugin + receive-data-path manager",
    host=gpu_host.TCPXO_HOST,
    install=(
        f"docker run --rm -v /var/lib:/var/lib {_AR}/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.8-1"
        " install --install-nccl",
        "(docker rm -f receive-datapath-manager >/dev/null 2>&1 || true) && "
        "docker run --detach --name receive-datapath-manager --restart unless-stopped --cap-add=NET_ADMIN "
        "--network=host --privileged --gpus all --volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64 "
        f"--entrypoint /fts/entrypoint_rxdm_container.sh {_AR}/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.14 "
        "--num_hops=2 --num_nics=8 --uid= --alsologtostderr",
    ),
    env={"NCCL_FASTRAK_CTRL_DEV": _A3_CTRL_IFACE, "NCCL_FASTRAK_IFNAME": _A3_MEGA_GPU_IFACES,
         "NCCL_SOCKET_IFNAME": _A3_CTRL_IFACE, "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": "/dev/aperture_devices"},
    env_script=(_library_path("/var/lib/tcpxo/lib64"),
                "NCCL_LIB_DIR=/var/lib/tcpxo/lib64 . /var/lib/tcpxo/lib64/nccl-env-profile.sh"),
)

_GIB = NcclSetup(
    plugin="NCCL gIB plugin (RDMA over RoCE)",
    install=(
        "curl -fsSL https://us-apt.pkg.dev/doc/repo-signing-key.gpg | gpg --dearmor --yes "
        "-o /usr/share/keyrings/gce-ai-infra.gpg",
        *gpu_host.AR_TRANSPORT,
        "echo 'deb [signed-by=/usr/share/keyrings/gce-ai-infra.gpg] ar+https://us-apt.pkg.dev/projects/gce-ai-infra "
        "gpudirect-gib-apt main' "
        "> /etc/apt/sources.list.d/gpudirect-gib.list && apt-get update && apt-get install -y nccl-gib "
        "&& apt-mark hold nccl-gib",
    ),
    env={"NCCL_CROSS_NIC": "0",
         "NCCL_NET_GDR_LEVEL": "PIX", "NCCL_P2P_NET_CHUNKSIZE": "131072", "NCCL_NVLS_CHUNKSIZE": "524288",
         "NCCL_IB_GID_INDEX": "3", "NCCL_IB_ADAPTIVE_ROUTING": "1", "NCCL_IB_QPS_PER_CONNECTION": "4",
         "NCCL_IB_TC": "52", "NCCL_IB_FIFO_TC": "84",
         "NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner_config.txtpb"},
    env_script=(_library_path("/usr/local/gib/lib64"),),
)

GPUDIRECT: dict[str, GpuDirect] = {g.machine_type: g for g in (
    GpuDirect("a3-highgpu-8g", "GPUDirect-TCPX", "tcpx", host_nics=1, gpu_nics=4, gpu_nic_type="GVNIC",
              mtu=8244, line_rate_gbps=1000, hyperdisk_only=False, nccl=_TCPX),
    GpuDirect("a3-megagpu-8g", "GPUDirect-TCPXO", "tcpxo", host_nics=1, gpu_nics=8, gpu_nic_type="GVNIC",
              mtu=8244, line_rate_gbps=1800, hyperdisk_only=False, nccl=_TCPXO),
    GpuDirect("a3-ultragpu-8g", "GPUDirect RDMA", "rdma", host_nics=2, gpu_nics=8, gpu_nic_type="MRDMA",
              mtu=8896, line_rate_gbps=3600, hyperdisk_only=True, nccl=_GIB),
    GpuDirect("a4-highgpu-8g", "GPUDirect RDMA", "rdma", host_nics=2, gpu_nics=8, gpu_nic_type="MRDMA",
              mtu=8896, line_rate_gbps=3600, hyperdisk_only=True, nccl=_GIB),
)}

# Machine families a COMPACT placement policy may group ("Supported machine types" of
# https://cloud.google.com/ai-hypercomputer/docs/placement-policy-and-workload-policy: A4X Max,
# A4X, A4, A3 Ultra, A3 Mega, A3 High, A3 Edge, A2, G4, G2), with the limits of
# https://cloud.google.com/compute/docs/instances/define-instance-placement ("Restrictions": at
# most 150 VMs per compact policy; only VMs that TERMINATE on host maintenance — the figure is
# that page's; newer limits per maxDistance were not reachable from here).
COMPACT_PLACEMENT_FAMILIES = ("a2", "a3", "a4", "a4x", "g2", "g4")
COMPACT_PLACEMENT_MAX_VMS = 150


# Where the extra networks' subnets come from (program/gpu_network.py): one /24 each, as GCP's
# GPUDirect guides number them (192.168.N.0/24). A VM's NICs may not share address ranges.
EXTRA_NETWORKS_RANGE = "192.168.0.0/16"


def gpudirect(machine_type: str | None) -> GpuDirect | None:
    return GPUDIRECT.get(machine_type or "")


def boot_disk_type(machine_type: str | None) -> str:
    """Hyperdisk where the family takes no Persistent Disk, else the catalog's pd-balanced."""
    profile = gpudirect(machine_type)
    return catalog.HYPERDISK_BOOT_DISK_TYPE if profile and profile.hyperdisk_only else catalog.BOOT_DISK_TYPE


def takes_compact_placement(machine_type: str | None) -> bool:
    return (machine_type or "").split("-", 1)[0] in COMPACT_PLACEMENT_FAMILIES
