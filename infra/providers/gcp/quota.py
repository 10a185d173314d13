"""Quota pre-flight: before `up` creates anything billable, the Compute quota the stack needs
(quota_needs.py: vCPUs, GPUs, instances, boot disks, external addresses) against what is free.

A new project's GPUS_ALL_REGIONS is 0 (https://cloud.google.com/compute/resource-usage#gpu_quota),
and Compute counts every GPU against it and against the GPU's regional metric (spot VMs against
the PREEMPTIBLE_ one). Without this check the first instance fails mid-`up` with "Quota
'GPUS_ALL_REGIONS' exceeded", after the network and bucket exist. Limits and usage are read from
Compute itself (projects.get for project-wide metrics, regions.get for regional ones); where
the Compute API is not enabled yet, it is enabled first (not billable), as the program would.
The GPUs Compute has no per-model metric for (H100, H100 Mega, H200, B200) count in the GPU-family
quota instead, which only Cloud Quotas shows (quota_family.py); it is read, enabling Cloud Quotas
first where needed, whenever the stack has such GPUs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from infra.errors import ConfigError
from infra.providers.gcp import quota_family
from infra.providers.gcp.quota_needs import COMPUTE, GLOBAL, Need, needs
from infra.providers.gcp.reaper import google_client
from infra.spec.cluster import ClusterSpec
from infra.spec.gpu_quota import GPU_FAMILY_METRIC, GPU_FAMILY_QUOTA_ID, counts_as_preemptible, quota_family_of

__all__ = ["GLOBAL", "Need", "Shortfall", "existing_nodes", "families_of", "needs", "shortfalls", "how_to_raise",
           "preflight", "read_quotas"]

ENABLE_TIMEOUT_SECONDS = 300.0
EMAIL_PLACEHOLDER = "YOUR_EMAIL"  # who Google may ask about the request; trainctl does not know it
Quotas = dict[str, tuple[float, float]]  # metric -> (limit, usage)


@dataclass(frozen=True)
class Shortfall:
    need: Need
    limit: float
    usage: float

    @property
    def free(self) -> float:
        return max(self.limit - self.usage, 0.0)

    def describe(self, project: str) -> str:
        where = "project-wide" if self.need.region == GLOBAL else f"in {self.need.region}"
        family = quota_family_of(self.need.metric)
        name = f"{GPU_FAMILY_QUOTA_ID} (gpu_family {family})" if family else self.need.metric
        return (f"quota {name} {where}: limit {plain(self.limit)}, {plain(self.usage)} in use, "
                f"{plain(self.free)} free, this stack needs {plain(self.need.amount)}")


def plain(value: float) -> str:
    """A quota amount as a user reads and pastes it (--preferred-value, 1000000): `:g` writes a
    million as 1e+06."""
    return str(int(value)) if value == int(value) else f"{value:f}".rstrip("0")


def charged(need: Need, quotas: Quotas) -> Need:
    """The metric a need is charged to: a spot need goes to the standard metric where the
    project's preemptible limit is 0 (or not reported)."""
    if need.fallback and not counts_as_preemptible(quotas, need.metric):
        return Need(need.fallback, need.region, need.amount)
    return need


def shortfalls(project: str, wanted: list[Need], read: Callable[[str], Quotas]) -> list[Shortfall]:
    """`read(region or GLOBAL)` -> {metric: (limit, usage)}; a metric Compute does not report
    for the region is not enforced there."""
    by_region: dict[str, dict[str, tuple[float, float]]] = {}
    out = []
    for need in wanted:
        if need.amount <= 0:
            continue  # nodes that exist already: their quota is in the usage
        if need.region not in by_region:
            by_region[need.region] = read(need.region)
        need = charged(need, by_region[need.region])
        limit_usage = by_region[need.region].get(need.metric)
        if limit_usage is None:
            continue
        limit, usage = limit_usage
        if usage + need.amount > limit:
            out.append(Shortfall(need, limit, usage))
    return out


def how_to_raise(project: str, shortfall: Shortfall) -> str:
    """Where to ask for more: the console's quota page filtered to the metric, or Cloud Quotas."""
    metric, region = shortfall.need.metric, shortfall.need.region
    wanted = shortfall.usage + shortfall.need.amount
    family = quota_family_of(metric)
    # Cloud Quotas ids of Compute's metrics: GPUS-ALL-REGIONS-per-project, NVIDIA-T4-GPUS-per-project-region;
    # the family quota's, metric and dimensions: infra/spec/gpu_quota.py
    quota_id = metric.replace("_", "-") + ("-per-project" if region == GLOBAL else "-per-project-region")
    console_metric = metric.lower()
    dimensions = "" if region == GLOBAL else f" --dimensions=region={region}"
    if family:
        quota_id, console_metric = GPU_FAMILY_QUOTA_ID, GPU_FAMILY_METRIC
        dimensions += f",gpu_family={family}"  # --dimensions=[KEY=VALUE,...] (the command's reference below)
    console = (f"https://console.cloud.google.com/iam-admin/quotas?project={project}"
               f"&metric=compute.googleapis.com%2F{console_metric}")
    # An increase needs a contact address: "When requesting a quota increase, the email address is
    # required" (QuotaPreference.contact_email,
    # https://cloud.google.com/ruby/docs/reference/google-cloud-cloud_quotas-v1/0.3.2/Google-Cloud-CloudQuotas-V1-QuotaPreference;
    # the command's flag: --email=EMAIL, https://cloud.google.com/sdk/gcloud/reference/quotas/preferences/create)
    return (f"`gcloud quotas preferences create --service={COMPUTE} --project={project} "
            f"--quota-id={quota_id} --preferred-value={plain(wanted)}{dimensions} --email={EMAIL_PLACEHOLDER}` "
            f"(with your email for {EMAIL_PLACEHOLDER}) or {console}")


def families_of(wanted: list[Need]) -> set[str]:
    """The gpu_family values whose GPU-family quota the needs are (or fall back to)."""
    return {f for n in wanted for m in (n.metric, n.fallback) if m and (f := quota_family_of(m))}


def preflight(spec: ClusterSpec, progress: Callable[[str], None]) -> None:
    """Refuses (ConfigError, before anything is created) a stack whose VMs the project's free
    quota cannot hold, naming each metric, its limit, usage and what is free, and how to raise it."""
    if not needs(spec) or spec.project is None:
        return
    project: str = spec.project
    _ensure_compute(project, progress)
    wanted = needs(spec, existing_nodes(spec))
    families = families_of(wanted)
    missing = shortfalls(project, wanted, lambda region: _read_enabling(project, region, families, progress))
    if missing:
        lines = "\n".join(f"  - {m.describe(project)}; raise it: {how_to_raise(project, m)}"
                          for m in missing)
        raise ConfigError(f"project {project} has too little quota for stack {spec.name} "
                          f"(nothing was created):\n{lines}")
    progress("quota: " + ", ".join(f"{n.metric} ({n.region}) {plain(n.amount)}" for n in wanted if n.amount > 0)
             + " available")


def existing_nodes(spec: ClusterSpec) -> dict[str, int]:
    """The stack's VMs (GKE nodes too) that exist in its zone, per pool: an `up` or `plan` of a
    stack that is up already needs no new quota for them."""
    from google.cloud import compute_v1

    request = compute_v1.ListInstancesRequest(project=spec.project, zone=spec.zone,
                                              filter=f"labels.trainctl-stack = {spec.name}")
    out: dict[str, int] = {}
    for vm in google_client(compute_v1.InstancesClient).list(request=request):
        if vm.labels.get("managed-by") == "trainctl":
            pool = vm.labels.get("trainctl-role") or spec.name
            out[pool] = out.get(pool, 0) + 1
    return out


def read_quotas(project: str, region: str, families: set[str] | None = None) -> Quotas:
    """{metric: (limit, usage)} of a region, or project-wide ones for GLOBAL (Compute's own numbers),
    and the region's GPU-family quota of `families` (GPUS_PER_GPU_FAMILY:<family>, from Cloud Quotas)."""
    from google.cloud import compute_v1

    if region == GLOBAL:
        quotas = google_client(compute_v1.ProjectsClient).get(project=project).quotas
        return {q.metric: (q.limit, q.usage) for q in quotas}
    quotas = google_client(compute_v1.RegionsClient).get(project=project, region=region).quotas
    out = {q.metric: (q.limit, q.usage) for q in quotas}
    return {**out, **quota_family.read(project, region, families or set(), out)}


def _read_enabling(project: str, region: str, families: set[str], progress: Callable[[str], None]) -> Quotas:
    """read_quotas, enabling Cloud Quotas first where the project has it off (it costs nothing)."""
    try:
        return read_quotas(project, region, families)
    except quota_family.CloudQuotasDisabled:
        pass
    progress(f"enabling {quota_family.CLOUD_QUOTAS} in project {project} to read its GPU-family quota "
             "(enabling an API costs nothing)")
    from infra.providers.gcp import service_usage

    service_usage.enable(project, [quota_family.CLOUD_QUOTAS], timeout=ENABLE_TIMEOUT_SECONDS, sleep=time.sleep)
    return read_quotas(project, region, families)


def _ensure_compute(project: str, progress: Callable[[str], None]) -> None:
    """Compute's quotas are read through Compute: a fresh project must enable it first."""
    from google.api_core.exceptions import Forbidden
    from google.cloud import compute_v1

    try:
        google_client(compute_v1.ProjectsClient).get(project=project)
        return
    except Forbidden as exc:  # 403 over REST (PermissionDenied is gRPC's)
        if getattr(exc, "reason", None) != "SERVICE_DISABLED":
            raise
    progress(f"enabling {COMPUTE} in project {project} to read its quotas (enabling an API costs nothing)")
    from infra.providers.gcp import service_usage

    service_usage.enable(project, [COMPUTE], timeout=ENABLE_TIMEOUT_SECONDS, sleep=time.sleep)
