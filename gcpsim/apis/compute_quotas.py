"""Compute Engine allocation quotas: limits per project (global) and per region, usage counted
from the instances that exist, checked when an instance is inserted or started.

Limits are the project file's (`quotas: {global: {...}, <region>: {...}}`, project.py); a metric
the file does not set does not bind (GCE shows such a limit as the largest int64). Usage: every
instance not TERMINATED holds its vCPUs, GPUs, one INSTANCES and its external addresses
(stopped VMs release CPU and GPU quota); every disk holds its size in SSD_TOTAL_GB (pd-balanced,
pd-ssd) or DISKS_TOTAL_GB (pd-standard), stopped or not.
  - vCPUs count toward the family's metric (facts/quotas.py CPU_METRICS: N2_CPUS, A2_CPUS; CPUS for
    the others) and CPUS_ALL_REGIONS globally; GPUs toward GPUS_ALL_REGIONS and their model's metric
    (NVIDIA_T4_GPUS ...), or, for the GPUs Compute has no per-model metric for (H100, H100 Mega, H200,
    B200), toward the GPU-family quota GPUS_PER_GPU_FAMILY of their gpu_family in the region
    (facts/quotas.py; a project file sets it as `GPUS_PER_GPU_FAMILY:NVIDIA_H100: 8` under the region).
    regions.get does not show the family quota (a Compute Quota has no dimensions); Cloud Quotas'
    quotaInfos does (apis/cloudquotas.py).
  - Spot VMs use the PREEMPTIBLE_ variant where Compute has one and the project has such quota
    (limit > 0), else the standard quota (the family quota for H100 Mega, H200, B200)
    ("To prevent Spot VMs from consuming your quotas for standard VMs' CPUs, GPUs, and disks,
    consider requesting preemptible quota", https://cloud.google.com/compute/docs/instances/create-use-spot).
Exceeded, the insert's operation fails as GCE's does: errors[].code QUOTA_EXCEEDED, HTTP 403,
"Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 0.0 globally." / "... in region us-central1."
(two spaces, as the API writes it: https://github.com/scylladb/scylla-cluster-tests/issues/3649,
https://github.com/fastai/course-v3/pull/165; operation form and HTTP 403:
https://github.com/GoogleCloudPlatform/ai-on-gke/issues/849), with a QuotaExceededInfo detail
(the Operation schema: "QuotaExceededInfo will have details when the error code is
QUOTA_EXCEEDED"; metric and limit names as in 'compute.googleapis.com/cpus' /
'CPUS-per-project-region', https://oneuptime.com/blog/post/2026-01-24-gcp-quota-exceeded-errors/view).
"""

from __future__ import annotations

from typing import Any

from gcpsim import discovery
from gcpsim.facts import quotas as facts
from gcpsim.facts.machine_types import MACHINE_TYPES, TPU_HOSTS
from gcpsim.apis.compute_catalog import REGIONS, region_doc
from gcpsim.apis.compute_common import (
    UNLIMITED, collection, fingerprint, link, list_response, operation_error, region_of)
from gcpsim.errors import ApiError, not_found
from gcpsim.routes import Call, handles
from gcpsim.state import World

REGION_METRICS = ("CPUS", "N2_CPUS", "A2_CPUS", "PREEMPTIBLE_CPUS", "INSTANCES", "IN_USE_ADDRESSES",
                  "SSD_TOTAL_GB", "DISKS_TOTAL_GB",
                  *(m for q in facts.GPU_QUOTAS.values() for m in (q.metric, q.preemptible) if m))
GLOBAL_METRICS = (facts.GPUS_ALL_REGIONS, facts.CPUS_ALL_REGIONS, "NETWORKS", "SUBNETWORKS", "FIREWALLS", "ROUTERS")
GLOBAL_COUNTED = {"NETWORKS": "networks", "SUBNETWORKS": "subnetworks", "FIREWALLS": "firewalls",
                  "ROUTERS": "routers"}


def _known_metrics() -> set[str]:
    return set(discovery.api("compute.v1").schema("Quota")["properties"]["metric"]["enum"])


def limit(project: dict[str, Any], scope: str, metric: str) -> float | None:
    value = project.get("quotas", {}).get(scope, {}).get(metric)
    return None if value is None else float(value)


def _metric(project: dict[str, Any], region: str, standard: str, preemptible: str | None, spot: bool) -> str:
    """A spot VM's metric: the PREEMPTIBLE_ one where the project has such quota (a limit above
    0: a project without it shows 0.0, e.g. PREEMPTIBLE_CPUS in https://pastebin.com/9MY1rdpX),
    else the standard one (see the module docstring)."""
    return preemptible if spot and preemptible and (limit(project, region, preemptible) or 0.0) > 0 else standard


def _gpu_metric(project: dict[str, Any], region: str, gpu: str, spot: bool) -> str:
    q = facts.GPU_QUOTAS[gpu]
    standard = q.metric or facts.family_key(q.family or "")
    return _metric(project, region, standard, q.preemptible, spot)


def demand(project: dict[str, Any], instance: dict[str, Any]) -> dict[tuple[str, str], float]:
    """What one instance holds: {(scope, metric): amount}, scope "global" or a region."""
    sim = instance["_sim"]
    preemptible = sim["spot"] or bool(sim.get("flex_start"))  # flex-start VMs take preemptible quota too
    region = region_of(sim["zone"])
    shape = MACHINE_TYPES.get(sim["machine_type"]) or TPU_HOSTS[sim["machine_type"]]
    vcpus = float(shape.vcpus)
    cpu = facts.cpu_metric(sim["machine_type"])
    cpu = _metric(project, region, "CPUS", "PREEMPTIBLE_CPUS", preemptible) if cpu == "CPUS" else cpu
    out = {("global", facts.CPUS_ALL_REGIONS): vcpus, (region, cpu): vcpus, (region, "INSTANCES"): 1.0}
    if "disk" in sim:  # the boot disk an insert is about to create (an existing one is counted as a disk)
        key = (region, _disk_metric(sim["disk"]))
        out[key] = out.get(key, 0.0) + float(sim["disk"]["sizeGb"])
    gpus = sum(sim["gpus"].values())
    if gpus:
        out[("global", facts.GPUS_ALL_REGIONS)] = float(gpus)
    for gpu, count in sim["gpus"].items():
        key = (region, _gpu_metric(project, region, gpu, preemptible))
        out[key] = out.get(key, 0.0) + count
    if sim.get("external"):
        out[(region, "IN_USE_ADDRESSES")] = 1.0
    return out


def _disk_metric(disk: dict[str, Any]) -> str:
    return facts.DISK_METRICS.get(disk["type"].rsplit("/", 1)[-1], "DISKS_TOTAL_GB")


def _holding(world: World, project_id: str) -> list[dict[str, Any]]:
    return [i for i in collection(world, project_id, "instances").values() if i["status"] != "TERMINATED"]


def usage(world: World, project: dict[str, Any]) -> dict[tuple[str, str], float]:
    total: dict[tuple[str, str], float] = {}
    for inst in _holding(world, project["id"]):
        for key, amount in demand(project, inst).items():
            total[key] = total.get(key, 0.0) + amount
    for disk in collection(world, project["id"], "disks").values():
        key = (region_of(disk["zone"].rsplit("/", 1)[-1]), _disk_metric(disk))
        total[key] = total.get(key, 0.0) + float(disk["sizeGb"])
    for metric, name in GLOBAL_COUNTED.items():
        total[("global", metric)] = float(len(collection(world, project["id"], name)))
    return total


def check(world: World, project: dict[str, Any], instance: dict[str, Any]) -> ApiError | None:
    """The quota an instance would exceed, as the error its operation fails with; None if it fits.
    Project-wide limits are checked first (a fresh project's GPUS_ALL_REGIONS = 0 is what users
    meet first)."""
    used = usage(world, project)
    wanted = sorted(demand(project, instance).items(), key=lambda kv: kv[0][0] != "global")
    for (scope, metric), amount in wanted:
        cap = limit(project, scope, metric)
        if cap is not None and used.get((scope, metric), 0.0) + amount > cap:
            return exceeded(scope, metric, cap)
    return None


def exceeded(scope: str, metric: str, cap: float) -> ApiError:
    where = "globally" if scope == "global" else f"in region {scope}"
    name, _, family = metric.partition(":")  # GPUS_PER_GPU_FAMILY:<gpu_family>
    info: dict[str, Any] = {"metricName": f"compute.googleapis.com/{name.lower()}",
                            "limitName": f"{name.replace('_', '-')}-per-project"
                                         + ("" if scope == "global" else "-region"),
                            "limit": cap}
    if scope != "global":
        info["dimensions"] = {"region": scope}
    if family:  # the metric and quota id of facts/quotas.py; its two dimensions
        info.update(metricName=facts.FAMILY_METRIC_NAME, limitName=facts.FAMILY_QUOTA_ID,
                    dimensions={"region": scope, "gpu_family": family})
    return operation_error(403, "QUOTA_EXCEEDED", f"Quota '{name}' exceeded.  Limit: {cap:.1f} {where}.",
                           [{"quotaInfo": info}])


def _rows(project: dict[str, Any], used: dict[tuple[str, str], float], scope: str,
          metrics: tuple[str, ...]) -> list[dict[str, Any]]:
    known = _known_metrics()
    names = [m for m in metrics if m in known]
    names += sorted(m for m in project.get("quotas", {}).get(scope, {}) if m in known and m not in names)
    rows = []
    for metric in names:
        cap = limit(project, scope, metric)
        rows.append({"metric": metric, "limit": UNLIMITED if cap is None else cap,
                     "usage": used.get((scope, metric), 0.0)})
    return rows


@handles("compute.regions.get")
def get_region(call: Call) -> Any:
    region = call.params["region"]
    if region not in REGIONS:
        raise not_found(f"projects/{call.project_id}/regions/{region}")
    project = call.world.project(call.project_id)
    assert project is not None
    return region_doc(project["id"], region, _rows(project, usage(call.world, project), region, REGION_METRICS))


@handles("compute.regions.list")
def list_regions(call: Call) -> Any:
    project = call.world.project(call.project_id)
    assert project is not None
    used = usage(call.world, project)
    docs = [region_doc(project["id"], r, _rows(project, used, r, REGION_METRICS)) for r in REGIONS]
    return list_response(call, "compute#regionList", f"projects/{project['id']}/regions", docs)


@handles("compute.projects.get")
def get_project(call: Call) -> Any:
    project = call.world.project(call.project_id)
    assert project is not None
    items = project.get("commonInstanceMetadata", [])
    return {"kind": "compute#project", "id": str(project["number"]), "name": project["id"],
            "creationTimestamp": "1970-01-01T00:00:00.000Z", "selfLink": link(f"projects/{project['id']}"),
            "quotas": _rows(project, usage(call.world, project), "global", GLOBAL_METRICS),
            "commonInstanceMetadata": {"kind": "compute#metadata", "fingerprint": fingerprint(items),
                                       "items": items},
            "defaultServiceAccount": f"{project['number']}-compute@developer.gserviceaccount.com",
            "defaultNetworkTier": "PREMIUM", "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS",
            "vmDnsSetting": "ZONAL_ONLY"}
