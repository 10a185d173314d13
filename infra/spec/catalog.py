"""The one catalog of accelerators: what exists, where, in which combinations, at what list price.

Validation (infra/spec/cluster.py), Pulumi arguments (infra/providers/gcp/) and cost estimates (infra/spec/cost.py)
all read these tables; nothing else in the project spells a machine type or a price.
Prices are on-demand list prices in USD per hour for us-central1 and serve estimates only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class GpuType:
    name: str  # the accelerator type GCE expects, e.g. "nvidia-tesla-t4"
    label: str  # what users call it, e.g. "T4"
    memory_gb: int
    zones: tuple[str, ...]
    attachable_counts: tuple[int, ...] = ()  # counts attachable to N1; empty = only bundled
    price_per_gpu: float = 0.0  # attached GPUs; bundled ones are in the machine's price
    spot_price_per_gpu: float = 0.0
    # Compute's regional metric for this GPU (API's Quota.metric), PREEMPTIBLE_<metric> for spot VMs;
    # "": none, the GPU counts in GPU_FAMILY_QUOTA's `quota_family`, spot VMs in `spot_quota_metric`
    # where Compute has one. Every GPU also counts against GPUS_ALL_REGIONS.
    quota_metric: str = ""
    quota_family: str = ""
    spot_quota_metric: str = ""

    def quota_metric_for(self, spot: bool) -> str:
        standard = self.quota_metric or family_quota(self.quota_family)
        preemptible = f"PREEMPTIBLE_{self.quota_metric}" if self.quota_metric else self.spot_quota_metric
        return (preemptible or standard) if spot else standard


@dataclass(frozen=True)
class MachineType:
    name: str
    vcpus: int
    memory_gb: float
    price: float
    spot_price: float
    bundled_gpu: str | None = None  # GpuType.name for a2/a3/g2
    bundled_gpu_count: int = 0

    @property
    def family(self) -> str:
        return self.name.split("-", 1)[0]


@dataclass(frozen=True)
class TpuType:
    name: str  # accelerator type as the TPU API takes it, e.g. "v5litepod-16"
    generation: str  # "v4", "v5e", "v5p", "v6e"
    chips: int
    chips_per_host: int
    zones: tuple[str, ...]
    runtime_versions: tuple[str, ...]
    price_per_chip: float
    spot_price_per_chip: float
    gke_machine_type: str | None = None  # node machine type for a GKE TPU pool
    gke_accelerator: str | None = None  # cloud.google.com/gke-tpu-accelerator value

    @property
    def hosts(self) -> int:
        return max(1, self.chips // self.chips_per_host)

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def topology(self) -> str:
        """The slice's physical topology, as GKE's placement policy takes it."""
        return _TOPOLOGIES[self.generation][self.chips]


# --- GPUs -----------------------------------------------------------------------------------

_US_CENTRAL = ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")

# The project-wide GPU quota (a new project's is 0): https://cloud.google.com/compute/resource-usage#gpu_quota
GPUS_ALL_REGIONS = "GPUS_ALL_REGIONS"
# The regional quota of GPUs without a Compute metric of their own: infra/spec/gpu_quota.py.
GPU_FAMILY_QUOTA = "GPUS_PER_GPU_FAMILY"


def family_quota(gpu_family: str) -> str:
    return f"{GPU_FAMILY_QUOTA}:{gpu_family}"


GPUS: dict[str, GpuType] = {
    g.name: g
    for g in (
        GpuType("nvidia-tesla-t4", "T4", 16,
                _US_CENTRAL + ("us-east1-c", "us-east1-d", "us-west1-a", "us-west1-b",
                               "europe-west4-a", "europe-west4-b", "asia-east1-a"),
                attachable_counts=(1, 2, 4), price_per_gpu=0.35, spot_price_per_gpu=0.14,
                quota_metric="NVIDIA_T4_GPUS"),
        GpuType("nvidia-tesla-v100", "V100", 16,
                ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f",
                 "us-west1-a", "us-west1-b", "europe-west4-a", "europe-west4-b"),
                attachable_counts=(1, 2, 4, 8), price_per_gpu=2.48, spot_price_per_gpu=0.99,
                quota_metric="NVIDIA_V100_GPUS"),
        GpuType("nvidia-tesla-p100", "P100", 16,
                ("us-central1-c", "us-central1-f", "us-east1-b", "us-west1-a", "us-west1-b",
                 "europe-west4-a"),
                attachable_counts=(1, 2, 4), price_per_gpu=1.46, spot_price_per_gpu=0.58,
                quota_metric="NVIDIA_P100_GPUS"),
        GpuType("nvidia-l4", "L4", 24,
                ("us-central1-a", "us-central1-b", "us-central1-c", "us-east1-b", "us-east4-a",
                 "us-west1-a", "us-west1-b", "europe-west4-a", "europe-west4-b", "asia-east1-a"),
                quota_metric="NVIDIA_L4_GPUS"),
        GpuType("nvidia-tesla-a100", "A100 40GB", 40,
                ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f",
                 "us-east1-b", "us-west1-b", "us-west4-b", "europe-west4-a", "europe-west4-b",
                 "asia-northeast1-a"),
                quota_metric="NVIDIA_A100_GPUS"),
        GpuType("nvidia-a100-80gb", "A100 80GB", 80,
                ("us-central1-a", "us-central1-c", "us-east4-c", "us-east5-b", "europe-west4-a",
                 "asia-southeast1-c"),
                quota_metric="NVIDIA_A100_80GB_GPUS"),
        GpuType("nvidia-h100-80gb", "H100 80GB", 80,
                ("us-central1-a", "us-central1-c", "us-east4-a", "us-east5-a", "us-west1-a",
                 "europe-west4-b", "asia-northeast1-b"),
                quota_family="NVIDIA_H100", spot_quota_metric="PREEMPTIBLE_NVIDIA_H100_GPUS"),
        # The GPUs of the GPUDirect families (infra/spec/gpu_networks.py). Accelerator names and
        # memory: https://cloud.google.com/compute/docs/gpus ("GPU machine types"); zones: the
        # ones GCP's recipes deploy these families in (NOT re-checked against the GPU locations
        # page here: trainctl refuses other zones until they are added); quota: GPU_FAMILY_QUOTA.
        GpuType("nvidia-h100-mega-80gb", "H100 Mega 80GB", 80,
                ("us-central1-a", "us-central1-c", "us-east4-a", "us-east5-a", "europe-west4-b",
                 "asia-northeast1-b"),
                quota_family="NVIDIA_H100_MEGA"),
        GpuType("nvidia-h200-141gb", "H200 141GB", 141,
                ("us-central1-b", "us-east4-b", "us-east5-a", "us-west1-c", "europe-west1-b",
                 "asia-south1-b"),
                quota_family="NVIDIA_H200"),
        GpuType("nvidia-b200", "B200", 180,
                ("us-central1-b", "us-east4-b", "us-east5-a", "us-west2-c", "europe-west4-b",
                 "asia-northeast1-b"),
                quota_family="NVIDIA_B200"),
    )
}


def _machines() -> list[MachineType]:
    out: list[MachineType] = []
    # N1: GPUs are attached; price scales with vCPUs (0.0475/vCPU-hour incl. memory).
    for vcpus in (1, 2, 4, 8, 16, 32, 64, 96):
        out.append(MachineType(f"n1-standard-{vcpus}", vcpus, vcpus * 3.75,
                               round(0.0475 * vcpus, 4), round(0.0100 * vcpus, 4)))
    for vcpus in (2, 4, 8, 16, 32, 64, 96):
        out.append(MachineType(f"n1-highmem-{vcpus}", vcpus, vcpus * 6.5,
                               round(0.0592 * vcpus, 4), round(0.0125 * vcpus, 4)))
    # G2: L4s come bundled with the machine type.
    for name, vcpus, mem, gpus, price, spot in (
        ("g2-standard-4", 4, 16, 1, 0.71, 0.28), ("g2-standard-8", 8, 32, 1, 0.85, 0.34),
        ("g2-standard-12", 12, 48, 1, 1.00, 0.40), ("g2-standard-16", 16, 64, 1, 1.15, 0.46),
        ("g2-standard-24", 24, 96, 2, 2.00, 0.80), ("g2-standard-32", 32, 128, 1, 1.73, 0.69),
        ("g2-standard-48", 48, 192, 4, 4.00, 1.60), ("g2-standard-96", 96, 384, 8, 8.00, 3.20),
    ):
        out.append(MachineType(name, vcpus, mem, price, spot, "nvidia-l4", gpus))
    # A2 (A100 40GB: highgpu/megagpu; A100 80GB: ultragpu).
    for name, vcpus, mem, gpus, price, spot in (
        ("a2-highgpu-1g", 12, 85, 1, 3.67, 1.47), ("a2-highgpu-2g", 24, 170, 2, 7.35, 2.94),
        ("a2-highgpu-4g", 48, 340, 4, 14.69, 5.88), ("a2-highgpu-8g", 96, 680, 8, 29.39, 11.76),
        ("a2-megagpu-16g", 96, 1360, 16, 55.74, 22.30),
    ):
        out.append(MachineType(name, vcpus, mem, price, spot, "nvidia-tesla-a100", gpus))
    for name, vcpus, mem, gpus, price, spot in (
        ("a2-ultragpu-1g", 12, 170, 1, 5.07, 2.03), ("a2-ultragpu-2g", 24, 340, 2, 10.14, 4.06),
        ("a2-ultragpu-4g", 48, 680, 4, 20.28, 8.11), ("a2-ultragpu-8g", 96, 1360, 8, 40.55, 16.22),
    ):
        out.append(MachineType(name, vcpus, mem, price, spot, "nvidia-a100-80gb", gpus))
    out.append(MachineType("a3-highgpu-8g", 208, 1872, 88.25, 35.30, "nvidia-h100-80gb", 8))
    # The GPUDirect families' 8-GPU machines (vCPUs, memory: accelerator-optimized-machines;
    # prices are estimates in the order of the published list prices, not re-checked here).
    out.append(MachineType("a3-megagpu-8g", 208, 1872, 94.00, 37.60, "nvidia-h100-mega-80gb", 8))
    out.append(MachineType("a3-ultragpu-8g", 224, 2952, 84.80, 33.92, "nvidia-h200-141gb", 8))
    out.append(MachineType("a4-highgpu-8g", 224, 3968, 107.00, 42.80, "nvidia-b200", 8))
    # E2/N2 for CPU-only nodes (GKE system pools, controllers). e2-medium is GKE's default
    # node machine type (a cluster's default pool, before trainctl removes it).
    out.append(MachineType("e2-medium", 2, 4, 0.0335, 0.0101))
    for vcpus in (2, 4, 8, 16, 32):
        out.append(MachineType(f"e2-standard-{vcpus}", vcpus, vcpus * 4,
                               round(0.0335 * vcpus, 4), round(0.0101 * vcpus, 4)))
        out.append(MachineType(f"n2-standard-{vcpus}", vcpus, vcpus * 4,
                               round(0.0486 * vcpus, 4), round(0.0117 * vcpus, 4)))
    return out


MACHINES: dict[str, MachineType] = {m.name: m for m in _machines()}

# Compute's regional vCPU metric (Quota.metric) by family; others (N1, E2, G2, A3) count in CPUS (spot
# VMs in PREEMPTIBLE_CPUS where the project has that quota), every vCPU in CPUS_ALL_REGIONS.
CPU_QUOTA_METRICS = {"n2": "N2_CPUS", "a2": "A2_CPUS"}
CPUS_ALL_REGIONS = "CPUS_ALL_REGIONS"
# Persistent disk quota (regional, GB) by disk type: balanced and SSD persistent disks count toward
# SSD_TOTAL_GB, standard ones toward DISKS_TOTAL_GB (https://cloud.google.com/compute/resource-usage).
DISK_QUOTA_METRICS = {"pd-standard": "DISKS_TOTAL_GB", "pd-balanced": "SSD_TOTAL_GB", "pd-ssd": "SSD_TOTAL_GB"}


def cpu_quota_metric(machine_type: str) -> str:
    return CPU_QUOTA_METRICS.get(machine_type.split("-", 1)[0], "CPUS")

# Families that take attached GPUs (guest_accelerators) and those whose GPUs are bundled.
ATTACHABLE_GPU_FAMILIES = ("n1",)
# Per-GPU vCPU ceilings on N1 (GCE refuses more vCPUs than these per attached GPU count).
N1_MAX_VCPUS_PER_GPU_COUNT = {
    "nvidia-tesla-t4": {1: 48, 2: 48, 4: 96},
    "nvidia-tesla-v100": {1: 12, 2: 24, 4: 48, 8: 96},
    "nvidia-tesla-p100": {1: 16, 2: 32, 4: 96},
}

# --- TPUs -----------------------------------------------------------------------------------

_TOPOLOGIES: dict[str, dict[int, str]] = {
    "v5e": {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16",
            256: "16x16"},
    "v6e": {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16",
            256: "16x16"},
    "v4": {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8",
           256: "4x8x8", 512: "8x8x8"},
    "v5p": {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8"},
}

_V5E_ZONES = ("us-central1-a", "us-south1-a", "us-west1-c", "us-west4-a", "us-east1-c",
              "us-east5-b", "europe-west4-b", "asia-southeast1-b")
_V5E_RUNTIMES = ("v2-alpha-tpuv5-lite", "tpu-vm-tf-2.18.0-pjrt", "tpu-vm-tf-2.18.0-pod-pjrt")
_V4_ZONES = ("us-central2-b",)
_V4_RUNTIMES = ("tpu-ubuntu2204-base", "tpu-vm-v4-base", "tpu-vm-tf-2.18.0-pjrt",
                "tpu-vm-tf-2.18.0-pod-pjrt")
_V5P_ZONES = ("us-east5-a", "europe-west4-b", "us-central1-a")
_V5P_RUNTIMES = ("v2-alpha-tpuv5", "tpu-vm-tf-2.18.0-pjrt", "tpu-vm-tf-2.18.0-pod-pjrt")
_V6E_ZONES = ("us-east1-d", "us-east5-b", "us-central1-b", "europe-west4-a",
              "asia-northeast1-b", "us-south1-a")
_V6E_RUNTIMES = ("v2-alpha-tpuv6e", "tpu-vm-tf-2.18.0-pjrt", "tpu-vm-tf-2.18.0-pod-pjrt")


def _tpus() -> list[TpuType]:
    out: list[TpuType] = []
    for chips in (1, 4, 8, 16, 32, 64, 128, 256):
        # v5e: single-host shapes have 1, 4 or 8 chips on one VM; multi-host slices 4 per host.
        per_host = chips if chips <= 8 else 4
        gke_machine = {1: "ct5lp-hightpu-1t", 4: "ct5lp-hightpu-4t", 8: "ct5lp-hightpu-8t"}.get(
            per_host, "ct5lp-hightpu-4t")
        out.append(TpuType(f"v5litepod-{chips}", "v5e", chips, per_host, _V5E_ZONES,
                           _V5E_RUNTIMES, 1.20, 0.48, gke_machine, "tpu-v5-lite-podslice"))
        v6_machine = {1: "ct6e-standard-1t", 4: "ct6e-standard-4t", 8: "ct6e-standard-8t"}.get(
            per_host, "ct6e-standard-4t")
        out.append(TpuType(f"v6e-{chips}", "v6e", chips, per_host, _V6E_ZONES, _V6E_RUNTIMES,
                           2.70, 1.08, v6_machine, "tpu-v6e-slice"))
    # v4 and v5p names count TensorCores (2 per chip); 4 chips per host.
    for cores in (8, 16, 32, 64, 128, 256, 512, 1024):
        out.append(TpuType(f"v4-{cores}", "v4", cores // 2, 4, _V4_ZONES, _V4_RUNTIMES,
                           3.22, 0.97, "ct4p-hightpu-4t", "tpu-v4-podslice"))
    for cores in (8, 16, 32, 64, 128, 256):
        out.append(TpuType(f"v5p-{cores}", "v5p", cores // 2, 4, _V5P_ZONES, _V5P_RUNTIMES,
                           4.20, 1.68, "ct5p-hightpu-4t", "tpu-v5p-slice"))
    return out


TPUS: dict[str, TpuType] = {t.name: t for t in _tpus()}

# Every zone the catalog knows: where it places a GPU or TPU type (CPU machine types exist in all).
ZONES: tuple[str, ...] = tuple(sorted({z for g in GPUS.values() for z in g.zones}
                                      | {z for t in TPUS.values() for z in t.zones}))


def region_of(zone: str) -> str:
    """us-central1-a -> us-central1 (GCE zone names are the region's plus a letter)."""
    return zone.rsplit("-", 1)[0]


# The TPU API's quota per zone and generation, (on-demand, spot) ids as its quota errors name them
# ("Quota limit 'TPUV5sLitepodPerProjectPerZoneForTPUAPI' has been exceeded"), counted in chips
# (v5e, v6e) or TensorCores, two per chip (v4, v5p).
TPU_QUOTA_IDS = {"v5e": ("TPUV5sLitepodPerProjectPerZoneForTPUAPI", "TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI"),
                 "v6e": ("TPUV6EPerProjectPerZoneForTPUAPI", "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"),
                 "v4": ("TPUV4sPodPerProjectPerZoneForTPUAPI", "TPUV4sPreemptiblePodPerProjectPerZoneForTPUAPI"),
                 "v5p": ("TPUV5PPerProjectPerZoneForTPUAPI", "TPUV5PPreemptiblePerProjectPerZoneForTPUAPI")}


def tpu_quota_units(t: TpuType) -> int:
    return t.chips * 2 if t.generation in ("v4", "v5p") else t.chips


def tpu_quota_id(t: TpuType, spot: bool) -> str:
    return TPU_QUOTA_IDS[t.generation][1 if spot else 0]


def tpu_runtime_has_tensorflow(runtime: str) -> bool:
    """TensorFlow ships only in the tpu-vm-tf-* runtimes (the -pod- ones for multi-host
    slices); the base and v2-alpha-* runtimes have none: https://cloud.google.com/tpu/docs/runtimes"""
    return runtime.startswith("tpu-vm-tf-")


def tensorflow_runtimes(tpu: TpuType) -> list[str]:
    """The TF runtimes a slice of this type can run: the -pod- ones on multi-host slices."""
    return [r for r in tpu.runtime_versions if tpu_runtime_has_tensorflow(r)
            and ("-pod-" in r) == tpu.multi_host]


# The VM shapes behind TPU hosts (GKE TPU node pools' machine types), as (vCPUs, memory GB):
# https://cloud.google.com/tpu/docs/v5e, /v6e, /v4, /v5p ("TPU VM configurations").
TPU_HOST_MACHINES: dict[str, tuple[int, int]] = {
    "ct5lp-hightpu-1t": (24, 48), "ct5lp-hightpu-4t": (112, 192), "ct5lp-hightpu-8t": (224, 384),
    "ct6e-standard-1t": (44, 176), "ct6e-standard-4t": (180, 720), "ct6e-standard-8t": (180, 1440),
    "ct4p-hightpu-4t": (240, 407), "ct5p-hightpu-4t": (208, 448),
}


GKE_CLUSTER_FEE_PER_HOUR = 0.10

# Boot images. GPU nodes default to a Deep Learning VM family whose NVIDIA driver is
# preinstalled (bootstrap's driver step then finds nvidia-smi working and skips).
IMAGE_GPU_DEFAULT = "projects/deeplearning-platform-release/global/images/family/common-cu128-ubuntu-2204-nvidia-570"
IMAGE_CPU_DEFAULT = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
BOOT_DISK_TYPE = "pd-balanced"
# Families whose VMs take Hyperdisk only (gpu_networks.py says which): their boot disk.
HYPERDISK_BOOT_DISK_TYPE = "hyperdisk-balanced"
# The Python 3 each default boot image runs (python3 of Ubuntu 22.04, both images' base): what a
# job's framework must have a build for (trainctl/jobs/job_environment.py).
IMAGE_PYTHON = {IMAGE_GPU_DEFAULT: "3.10", IMAGE_CPU_DEFAULT: "3.10"}

# GKE container images by (framework, accelerator kind). A TPU pod needs torch_xla and libtpu,
# a GPU pod CUDA builds: the pool's accelerator decides, not the framework alone.
_DLC = "us-docker.pkg.dev/deeplearning-platform-release/gcr.io"
GKE_IMAGES: dict[tuple[str, str], str] = {
    ("torch", "cpu"): f"{_DLC}/pytorch-cpu.2-4.py310",
    ("torch", "gpu"): f"{_DLC}/pytorch-cu124.2-4.py310",
    ("torch", "tpu"): "us-central1-docker.pkg.dev/tpu-pytorch-releases/docker/xla:r2.7.0_3.10_tpuvm",
    ("tensorflow", "cpu"): f"{_DLC}/tf2-cpu.2-12.py310",
    ("tensorflow", "gpu"): f"{_DLC}/tf2-gpu.2-12.py310",
    # No Google-published TensorFlow image carries libtpu: TPU users bring their own image.
}


# The Kubernetes service account trainctl's pods run as; the program binds it to the nodes'
# Google service account (Workload Identity), so the two must agree.
GKE_KSA_NAMESPACE = "default"
GKE_KSA_NAME = "trainctl-runner"


def gke_image(framework: str, accelerator_kind: str) -> str | None:
    return GKE_IMAGES.get((framework, accelerator_kind))

# Flex-start VMs (GCE's FLEX_START provisioning model, Dynamic Workload Scheduler): the machine
# families that take them -- accelerator-optimized ones except A4X and G4, and H4D -- how long
# they may run (max run duration at most 7 days) and how long a request may wait in the queue
# (up to two hours). https://cloud.google.com/compute/docs/instances/about-flex-start-vms,
# https://cloud.google.com/blog/products/compute/introducing-flex-start-vms-for-the-compute-engine-instance-api
FLEX_START_FAMILIES = ("a2", "a3", "a4", "g2", "h4d")
FLEX_START_MAX_RUN_HOURS = 7 * 24
FLEX_START_MAX_WAIT_MINUTES = 120

# Local stack: nodes are namespaces on this machine.
LOCAL_MAX_NODES = 16


def choices(values: Iterable[str], limit: int = 12) -> str:
    """Valid values for an error message: sorted, the first `limit` of them."""
    ordered = sorted(values)
    shown = ", ".join(ordered[:limit])
    return shown + (f", … ({len(ordered)} in all)" if len(ordered) > limit else "")


def known_gpu(name: str) -> str:
    if name not in GPUS:
        raise ValueError(f"unknown GPU type {name!r}; valid: {choices(GPUS)}")
    return name


def known_tpu(name: str) -> str:
    if name not in TPUS:
        raise ValueError(f"unknown TPU type {name!r}; valid: {choices(TPUS)}")
    return name


def gpu_label_to_name(value: str) -> str:
    """Accept what users write ("t4", "A100 80GB", "nvidia-l4") and return the GCE name."""
    key = value.strip().lower().replace("_", "-")
    if key in GPUS:
        return key
    for g in GPUS.values():
        if key in (g.label.lower(), g.label.lower().replace(" ", "-"), g.name.split("-")[-1]):
            return g.name
    return value


# All-reduce bus bandwidth (GB/s, NCCL-tests' busbw) a healthy network reaches, by machine type; the
# pre-flight holds a run to a fraction of it (trainctl/jobs/network_check.py). None, a local node (veth,
# bridge, gloo's TCP): 0.59 GB/s measured between 2 nodes on 2-core machines (8 MiB), rounded down.
EXPECTED_BUSBW_GBPS: dict[str | None, float] = {None: 0.5}


def expected_busbw_gbps(machine_type: str | None) -> float | None:
    """What the network of nodes of this machine type should reach; None where not known."""
    return EXPECTED_BUSBW_GBPS.get(machine_type)
