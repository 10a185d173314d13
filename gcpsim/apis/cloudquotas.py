"""Cloud Quotas v1, the one read that shows Compute's GPU-family quota: quotaInfos.get of
GPUS-PER-GPU-FAMILY-per-project-region (facts/quotas.py).

The request and the QuotaInfo it answers (https://cloud.google.com/docs/quotas/reference/rest/v1/
projects.locations.services.quotaInfos): GET https://cloudquotas.googleapis.com/v1/
projects/{project}/locations/global/services/compute.googleapis.com/quotaInfos/{quotaId}; fields name,
quotaId, metric, service, isPrecise, containerType, dimensions, quotaDisplayName, metricDisplayName and
dimensionsInfos[] {dimensions, details: {value}, applicableLocations}, "ordered by their dimensions from
more specific ones to less specific ones" (the v1beta reference); the example QuotaInfo of this very
quota: https://cloud.google.com/docs/quotas/view-ongoing-rollouts. `details.value` is an int64, a JSON
string in proto3's mapping. The API is a service of its own, cloudquotas.googleapis.com
(https://cloud.google.com/docs/quotas/api-overview, "Service endpoint"), enabled per project as any API.

No discovery document of Cloud Quotas is installed here, so this is a raw route (routes.RAW). Values: the
project file's `GPUS_PER_GPU_FAMILY:<family>` limits per region, one entry each; where none is set, one
entry without dimensions holds the largest int64, as regions.get shows a limit that does not bind.
QuotaInfo has no usage (Cloud Monitoring has it); other quota ids answer 404 (not simulated).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gcpsim.apis.compute_catalog import REGIONS
from gcpsim.errors import ApiError, service_disabled
from gcpsim.facts import quotas as facts
from gcpsim.routes import raw

if TYPE_CHECKING:
    from gcpsim.server import Simulator

SERVICE = "cloudquotas.googleapis.com"
TITLE = "Cloud Quotas API"
INT64_MAX = 2**63 - 1
PATH = re.compile(r"^/v1/projects/(?P<project>[^/]+)/locations/global/services/compute\.googleapis\.com/"
                  r"quotaInfos/(?P<quota>[^/]+)$")


def quota_info(project: dict[str, Any]) -> dict[str, Any]:
    prefix = facts.family_key("")
    infos = [{"dimensions": {"region": region, "gpu_family": key.removeprefix(prefix)},
              "details": {"value": str(int(value))}, "applicableLocations": [region]}
             for region, limits in sorted(project.get("quotas", {}).items()) if region != "global"
             for key, value in sorted(limits.items()) if key.startswith(prefix)]
    infos.append({"dimensions": {}, "details": {"value": str(INT64_MAX)}, "applicableLocations": list(REGIONS)})
    return {"name": f"projects/{project['number']}/locations/global/services/compute.googleapis.com/"
                    f"quotaInfos/{facts.FAMILY_QUOTA_ID}",
            "quotaId": facts.FAMILY_QUOTA_ID, "metric": facts.FAMILY_METRIC_NAME, "service": "compute.googleapis.com",
            "isPrecise": True, "containerType": "PROJECT", "dimensions": list(facts.FAMILY_DIMENSIONS),
            "quotaDisplayName": facts.FAMILY_DISPLAY_NAME, "metricDisplayName": "GPUs", "dimensionsInfos": infos}


def _answer(status: int, doc: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json; charset=UTF-8"}, json.dumps(doc).encode()


@raw
def quota_infos(sim: Simulator, verb: str, target: str, body: bytes, headers: dict[str, str]
                ) -> tuple[int, dict[str, str], bytes] | None:
    matched = PATH.match(urlsplit(target).path)
    if matched is None or verb != "GET":
        return None
    try:
        with sim.store.transaction() as world:
            project = world.project(matched["project"])
            if project is None:
                raise ApiError(403, f"Permission denied on resource project {matched['project']}.")
            if project["services"].get(SERVICE) != "ENABLED":
                raise service_disabled(SERVICE, project["number"], TITLE)
            if matched["quota"] != facts.FAMILY_QUOTA_ID:
                raise ApiError(404, f"QuotaInfo {matched['quota']} is not simulated "
                                    f"(only {facts.FAMILY_QUOTA_ID} is)")
            return _answer(200, quota_info(project))
    except ApiError as exc:
        return _answer(exc.code, exc.body(False))
