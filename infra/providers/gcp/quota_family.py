"""The GPU-family quota of a region (infra/spec/gpu_quota.py): its limit read from Cloud Quotas, its
usage counted from the region's VMs.

Compute's regions.get cannot show it (a Compute Quota has metric, limit and usage, no dimensions), so
the limit is Cloud Quotas' QuotaInfo of GPUS-PER-GPU-FAMILY-per-project-region: GET
https://cloudquotas.googleapis.com/v1/projects/{project}/locations/global/services/compute.googleapis.com/
quotaInfos/{quotaId}, whose dimensionsInfos[] {dimensions, details.value, applicableLocations} are
"ordered by their dimensions from more specific ones to less specific ones"
(https://cloud.google.com/docs/quotas/reference/rest/v1/projects.locations.services.quotaInfos, the
v1beta reference's wording; this quota's example: https://cloud.google.com/docs/quotas/view-ongoing-rollouts).
The Cloud Quotas API is a service a project enables (https://cloud.google.com/docs/quotas/api-overview).
QuotaInfo has no usage: what holds the quota is counted here, every VM of the region not TERMINATED
with its bundled or attached GPUs of a family (stopped VMs release GPU quota, as Compute counts
them), except spot or flex-start H100s where the project has PREEMPTIBLE_NVIDIA_H100_GPUS quota (they
count there). Hand-written over REST as service_usage.py is: one read, no further client library.
"""

from __future__ import annotations

from typing import Any

from infra.errors import ProvisionError
from infra.providers.gcp import service_usage
from infra.providers.gcp.reaper import google_client
from infra.spec import catalog, gpu_quota

CLOUD_QUOTAS = "cloudquotas.googleapis.com"
DEFAULT_ENDPOINT = "https://cloudquotas.googleapis.com"
Quotas = dict[str, tuple[float, float]]


class CloudQuotasDisabled(ProvisionError):
    """The project has not enabled the Cloud Quotas API (403 SERVICE_DISABLED)."""


def read(project: str, region: str, families: set[str], compute: Quotas) -> Quotas:
    """{GPUS_PER_GPU_FAMILY:<family>: (limit, usage)} for each family Cloud Quotas has a value for
    in the region; `compute`: the region's own Compute quotas (regions.get)."""
    if not families:
        return {}
    infos = _quota_info(project).get("dimensionsInfos", [])
    used = usage(project, region, compute)
    out: Quotas = {}
    for family in sorted(families):
        limit = limit_of(infos, region, family)
        if limit is not None:
            out[catalog.family_quota(family)] = (limit, used.get(family, 0.0))
    return out


def limit_of(infos: list[dict[str, Any]], region: str, family: str) -> float | None:
    """The first (most specific) entry whose dimensions all hold for (region, family) and that
    applies to the region."""
    wanted = {"region": region, "gpu_family": family}
    for info in infos:
        if any(wanted.get(k) != v for k, v in (info.get("dimensions") or {}).items()):
            continue
        if region not in (info.get("applicableLocations") or [region]):
            continue
        return float(info.get("details", {}).get("value", 0))
    return None


def usage(project: str, region: str, compute: Quotas) -> dict[str, float]:
    """GPUs per family held by the region's VMs that are not TERMINATED."""
    from google.cloud import compute_v1

    out: dict[str, float] = {}
    request = compute_v1.AggregatedListInstancesRequest(project=project)
    for scope, listed in google_client(compute_v1.InstancesClient).aggregated_list(request=request):
        if not scope.startswith(f"zones/{region}-"):
            continue
        for vm in listed.instances:
            if vm.status == "TERMINATED":
                continue
            preemptible = vm.scheduling.preemptible or vm.scheduling.provisioning_model in ("SPOT", "FLEX_START")
            for name, count in _gpus(vm).items():
                gpu = catalog.GPUS.get(name)
                if gpu is None or not gpu.quota_family:
                    continue
                if preemptible and gpu.spot_quota_metric and gpu_quota.counts_as_preemptible(compute, gpu.spot_quota_metric):
                    continue
                out[gpu.quota_family] = out.get(gpu.quota_family, 0.0) + count
    return out


def _gpus(vm: Any) -> dict[str, int]:
    machine = catalog.MACHINES.get(vm.machine_type.rsplit("/", 1)[-1])
    out = {machine.bundled_gpu: machine.bundled_gpu_count} if machine and machine.bundled_gpu else {}
    for accel in vm.guest_accelerators:
        name = accel.accelerator_type.rsplit("/", 1)[-1]
        out.setdefault(name, accel.accelerator_count)  # a bundled GPU may be listed too: count it once
    return out


def _quota_info(project: str) -> dict[str, Any]:
    url = (f"{service_usage.base_url(DEFAULT_ENDPOINT)}/v1/projects/{project}/locations/global/services/compute.googleapis.com/"
           f"quotaInfos/{gpu_quota.GPU_FAMILY_QUOTA_ID}")
    response = service_usage.session().get(url)
    if response.status_code == 403 and "SERVICE_DISABLED" in response.text:
        raise CloudQuotasDisabled(f"the Cloud Quotas API ({CLOUD_QUOTAS}) is off in project {project}")
    if response.status_code >= 400:
        raise ProvisionError(f"reading {gpu_quota.GPU_FAMILY_QUOTA_ID} of project {project} from Cloud Quotas: "
                             f"{response.status_code} {response.text[:300]}")
    body: dict[str, Any] = response.json()
    return body
