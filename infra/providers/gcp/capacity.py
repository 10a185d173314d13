"""What `plan` shows of capacity, per pool: how its VMs get it (on demand, spot, a reservation)
and, per quota metric, what the pool needs against what the project has free; a stack whose
needs the free quota cannot hold is refused before anything is created.

Unlike `up`, `plan` changes nothing: it reads the quotas only where credentials are at hand
(plan stays usable offline) and the Compute API is on (`up` enables it; plan does not), and
otherwise shows the needs alone, saying why the free column is empty.
"""

from __future__ import annotations

import os
from pathlib import Path

from infra.errors import ConfigError
from infra.providers.gcp import quota, quota_family
from infra.providers.gcp.program.network import region_of
from infra.providers.gcp.quota_needs import COMPUTE, GLOBAL, TPU, PoolNeeds, per_pool
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from infra.providers.protocol import CAPACITY, PlanRow
from infra.spec.cluster import ClusterSpec

UNLIMITED = 1e18  # Compute reports an unset limit as the largest int64


def credentials_at_hand() -> bool:
    """Application default credentials a user set up, found without asking the network
    (google.auth.default() would probe the GCE metadata server)."""
    if os.environ.get(API_ENDPOINT_ENV) or os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"):
        return True
    from google.auth import _cloud_sdk

    return Path(_cloud_sdk.get_application_default_credentials_path()).is_file()


def _read_all(spec: ClusterSpec) -> tuple[dict[str, quota.Quotas] | None, dict[str, int], str]:
    """Every region's quotas the stack needs and its VMs that exist, or None and why not read."""
    if spec.project is None or spec.zone is None:
        return None, {}, "no gcp:project"
    if not credentials_at_hand():
        return None, {}, "not read: no Google credentials (`gcloud auth application-default login`)"
    from google.api_core.exceptions import Forbidden

    families = quota.families_of(quota.needs(spec))
    try:
        read = {region: quota.read_quotas(spec.project, region, families) for region in (GLOBAL, region_of(spec.zone))}
        return read, quota.existing_nodes(spec), ""
    except quota_family.CloudQuotasDisabled:
        return None, {}, (f"not read: the Cloud Quotas API, which alone shows the GPU-family quota, is off in "
                          f"project {spec.project} (`up` enables it)")
    except Forbidden as exc:  # over REST a disabled API answers 403 SERVICE_DISABLED
        if getattr(exc, "reason", None) != "SERVICE_DISABLED":
            raise
        return None, {}, f"not read: the Compute Engine API is off in project {spec.project} (`up` enables it)"


def _line(need: quota.Need, read: dict[str, quota.Quotas] | None) -> dict[str, object]:
    if read is None or need.service != COMPUTE:
        return {"metric": need.metric, "region": need.region, "needed": need.amount, "free": None}
    need = quota.charged(need, read[need.region])
    limit, usage = read[need.region].get(need.metric, (UNLIMITED, 0.0))
    free = None if limit >= UNLIMITED else max(limit - usage, 0.0)
    return {"metric": need.metric, "region": need.region, "needed": need.amount, "free": free}


def plan_rows(spec: ClusterSpec) -> list[PlanRow]:
    """One `capacity` row per pool; refuses (ConfigError, exit 2) a stack the free quota cannot
    hold, naming each metric, region, what is needed and free, and how to ask for more."""
    wanted = per_pool(spec)
    if not any(n.service == COMPUTE for pool in wanted for n in pool.needs):  # a TPU VM stack
        return [_row(pool, {}, None, "") for pool in wanted]
    read, existing, why = _read_all(spec)
    pools = per_pool(spec, existing)
    if read is not None:
        assert spec.project is not None
        project: str = spec.project
        missing = quota.shortfalls(project, quota.needs(spec, existing), lambda region: read[region])
        if missing:
            lines = "\n".join(f"  - {m.describe(project)}; raise it: {quota.how_to_raise(project, m)}"
                              for m in missing)
            raise ConfigError(f"project {project} has too little quota for stack {spec.name} "
                              f"(nothing was created):\n{lines}")
    return [_row(pool, existing, read, why) for pool in pools]


def _row(pool: PoolNeeds, existing: dict[str, int], read: dict[str, quota.Quotas] | None, why: str) -> PlanRow:
    return PlanRow(CAPACITY, pool.pool, {
        "nodes": pool.nodes, "existing": existing.get(pool.pool, 0), "provisioning": pool.provisioning,
        "quota": [_line(n, read) for n in pool.needs], **_why_not_read(pool, why)})


def _why_not_read(pool: PoolNeeds, why: str) -> dict[str, str]:
    if any(n.service == TPU for n in pool.needs):
        return {"quota_free": "not read: TPU quota is the TPU API's, checked per zone when the TPU is created"}
    return {"quota_free": why} if why else {}
