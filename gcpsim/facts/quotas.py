"""Compute Engine's allocation quotas that decide whether a VM can be created: the metrics each VM
holds, by GPU model, machine family and disk type, and the GPU-family quota of the newest GPUs.

Sources:
- Compute's per-model metrics: the `Quota.metric` enum of compute.v1.json (google-api-python-client's
  discovery cache, revision 20261106; the same enum as google-cloud-compute's `Quota.Metric`). It has
  NVIDIA_T4/V100/P100/L4/A100/A100_80GB_GPUS and their PREEMPTIBLE_ variants, PREEMPTIBLE_NVIDIA_H100_GPUS,
  but no NVIDIA_H100_GPUS, NVIDIA_H100_MEGA_GPUS, NVIDIA_H200_GPUS or NVIDIA_B200_GPUS (nor their
  PREEMPTIBLE_ variants but the H100's).
- The GPU-family quota those GPUs count in: Cloud Quotas' QuotaInfo of GPUS-PER-GPU-FAMILY-per-project-region,
  metric compute.googleapis.com/gpus_per_gpu_family, dimensions ["gpu_family", "region"], display name
  "GPUs per GPU family" (https://cloud.google.com/docs/quotas/view-ongoing-rollouts, its example QuotaInfo);
  gpu_family is a Compute "product attribute dimension" that "measures the number of GPUs of a given family"
  (https://cloud.google.com/docs/quotas/configure-dimensions). Compute's regions.get has no row for it: a
  Compute `Quota` has metric, limit and usage, no dimensions (compute.v1.json schema Quota).
- GCE's refusal names the metric GPUS_PER_GPU_FAMILY: "Quota 'GPUS_PER_GPU_FAMILY' exceeded.  Limit: 16.0 in
  region europe-west1" (code QUOTA_EXCEEDED; a Google accelerator-image test suite's README, "Accelerator Image
  Test Suite", found in the stored public code).
- gpu_family values: NVIDIA_H100, NVIDIA_H100_MEGA, NVIDIA_H200, NVIDIA_B200. No Google page in the stored
  material lists them; they were read in public tools that list a project's Cloud Quotas (one states
  "NVIDIA_B200 is a verbatim token ... verified live"; another lists NVIDIA_H100, NVIDIA_H100_MEGA,
  NVIDIA_H200, NVIDIA_B200 as Compute's gpu_family values). Each row says so.
- CPUs: N2_CPUS and A2_CPUS are enum metrics; N1, G2 and A3/A4 vCPUs count in CPUS; spot VMs of the CPUS
  families in PREEMPTIBLE_CPUS (https://cloud.google.com/compute/docs/instances/create-use-spot#quotas).
  The enum also has E2_CPUS; which families it meters was not checked here.
- disks: pd-balanced and pd-ssd count in SSD_TOTAL_GB, pd-standard in DISKS_TOTAL_GB
  (https://cloud.google.com/compute/resource-usage, "Disk quota").
- GPUS_ALL_REGIONS, CPUS_ALL_REGIONS: the project-wide metrics
  (https://cloud.google.com/compute/resource-usage#gpu_quota; both in the enum).
"""

from __future__ import annotations

from dataclasses import dataclass

GPUS_ALL_REGIONS = "GPUS_ALL_REGIONS"
CPUS_ALL_REGIONS = "CPUS_ALL_REGIONS"

# The GPU-family quota: the name GCE's QUOTA_EXCEEDED message gives it, its Cloud Quotas id, metric and dimensions.
FAMILY_METRIC = "GPUS_PER_GPU_FAMILY"
FAMILY_QUOTA_ID = "GPUS-PER-GPU-FAMILY-per-project-region"
FAMILY_METRIC_NAME = "compute.googleapis.com/gpus_per_gpu_family"
FAMILY_DIMENSIONS = ("gpu_family", "region")
FAMILY_DISPLAY_NAME = "GPUs per GPU family"


@dataclass(frozen=True)
class GpuQuota:
    gpu: str  # facts.gpus name
    metric: str | None  # Compute's per-model metric; None: the GPU counts in the family quota
    preemptible: str | None  # the PREEMPTIBLE_ per-model metric; None: spot VMs count as standard ones
    family: str | None = None  # the gpu_family dimension value of FAMILY_QUOTA_ID
    source: str = ""


_ENUM = "compute.v1.json Quota.metric enum (rev. 20261106)"
_FAMILY = f"not in the enum ({_ENUM}); counts in {FAMILY_QUOTA_ID}"
_FAMILY_VALUE = "gpu_family value read in public Cloud Quotas tools, not in a Google page here"

GPU_QUOTAS: dict[str, GpuQuota] = {q.gpu: q for q in (
    GpuQuota("nvidia-tesla-t4", "NVIDIA_T4_GPUS", "PREEMPTIBLE_NVIDIA_T4_GPUS", source=_ENUM),
    GpuQuota("nvidia-tesla-v100", "NVIDIA_V100_GPUS", "PREEMPTIBLE_NVIDIA_V100_GPUS", source=_ENUM),
    GpuQuota("nvidia-tesla-p100", "NVIDIA_P100_GPUS", "PREEMPTIBLE_NVIDIA_P100_GPUS", source=_ENUM),
    GpuQuota("nvidia-l4", "NVIDIA_L4_GPUS", "PREEMPTIBLE_NVIDIA_L4_GPUS", source=_ENUM),
    GpuQuota("nvidia-tesla-a100", "NVIDIA_A100_GPUS", "PREEMPTIBLE_NVIDIA_A100_GPUS", source=_ENUM),
    GpuQuota("nvidia-a100-80gb", "NVIDIA_A100_80GB_GPUS", "PREEMPTIBLE_NVIDIA_A100_80GB_GPUS", source=_ENUM),
    # The enum has PREEMPTIBLE_NVIDIA_H100_GPUS (and COMMITTED_) but no standard H100 metric.
    GpuQuota("nvidia-h100-80gb", None, "PREEMPTIBLE_NVIDIA_H100_GPUS", "NVIDIA_H100",
             f"{_FAMILY} (PREEMPTIBLE_NVIDIA_H100_GPUS is in it); {_FAMILY_VALUE}"),
    GpuQuota("nvidia-h100-mega-80gb", None, None, "NVIDIA_H100_MEGA", f"{_FAMILY}; {_FAMILY_VALUE}"),
    GpuQuota("nvidia-h200-141gb", None, None, "NVIDIA_H200", f"{_FAMILY}; {_FAMILY_VALUE}"),
    GpuQuota("nvidia-b200", None, None, "NVIDIA_B200", f"{_FAMILY}; {_FAMILY_VALUE}"),
)}

# vCPU metrics by machine family (the name's first part); the others count in CPUS.
CPU_METRICS = {"n2": "N2_CPUS", "a2": "A2_CPUS"}
DISK_METRICS = {"pd-standard": "DISKS_TOTAL_GB", "pd-balanced": "SSD_TOTAL_GB", "pd-ssd": "SSD_TOTAL_GB"}


def cpu_metric(machine_type: str) -> str:
    return CPU_METRICS.get(machine_type.split("-", 1)[0], "CPUS")


def family_key(family: str) -> str:
    """How a project file and the simulator's usage name a family's regional limit: GPUS_PER_GPU_FAMILY:NVIDIA_H100."""
    return f"{FAMILY_METRIC}:{family}"
