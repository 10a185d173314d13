"""The GPU-family quota: where the GPUs without a per-model Compute metric are counted.

compute.v1.json's Quota.metric enum (revision 20261106; google-cloud-compute's Quota.Metric alike) has
NVIDIA_T4/V100/P100/L4/A100/A100_80GB_GPUS and PREEMPTIBLE_NVIDIA_H100_GPUS, but no
NVIDIA_H100/H100_MEGA/H200/B200_GPUS. Those GPUs count in Cloud Quotas'
GPUS-PER-GPU-FAMILY-per-project-region: metric compute.googleapis.com/gpus_per_gpu_family, dimensions
gpu_family and region (https://cloud.google.com/docs/quotas/view-ongoing-rollouts, its example
QuotaInfo). GCE's refusal calls it GPUS_PER_GPU_FAMILY ("Quota 'GPUS_PER_GPU_FAMILY' exceeded.  Limit:
16.0 in region europe-west1", a Google accelerator-image test suite's README). Compute's regions.get has
no row for it (a Compute Quota has no dimensions): infra/providers/gcp/quota_family.py reads it from
Cloud Quotas. The gpu_family values of catalog.GPUS (NVIDIA_H100, NVIDIA_H100_MEGA, NVIDIA_H200,
NVIDIA_B200) were read in public tools that list a project's Cloud Quotas, not in a Google page found
here. A need of the quota is named GPUS_PER_GPU_FAMILY:<gpu_family> (catalog.family_quota).
"""

from __future__ import annotations

from infra.spec.catalog import GPU_FAMILY_QUOTA, GPUS

GPU_FAMILY_QUOTA_ID = "GPUS-PER-GPU-FAMILY-per-project-region"
GPU_FAMILY_METRIC = "gpus_per_gpu_family"  # compute.googleapis.com/<this>, the quota's metric


def counts_as_preemptible(quotas: dict[str, tuple[float, float]], preemptible_metric: str) -> bool:
    """Whether spot (and flex-start) capacity counts in `preemptible_metric`: only where the project
    has a limit for it; otherwise in the standard metric
    (https://cloud.google.com/compute/docs/instances/create-use-spot#quotas). `quotas`: {metric: (limit, usage)}."""
    return quotas.get(preemptible_metric, (0.0, 0.0))[0] > 0


def quota_family_of(metric: str) -> str | None:
    """NVIDIA_H100 for GPUS_PER_GPU_FAMILY:NVIDIA_H100; None for Compute's own metrics."""
    name, _, family = metric.partition(":")
    return family if name == GPU_FAMILY_QUOTA and family else None


def standard_quota_metric(metric: str) -> str | None:
    """What a PREEMPTIBLE_ metric's need falls back to where the project has no preemptible quota
    (https://cloud.google.com/compute/docs/instances/create-use-spot#quotas): the standard metric,
    or the family quota for a GPU without one. None for a metric that is not preemptible."""
    if not metric.startswith("PREEMPTIBLE_"):
        return None
    for gpu in GPUS.values():
        if gpu.quota_metric_for(True) == metric:
            return gpu.quota_metric_for(False)
    return metric.removeprefix("PREEMPTIBLE_")
