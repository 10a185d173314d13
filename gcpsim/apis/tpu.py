"""Cloud TPU v2: what the node and queued-resource modules share (operations, the catalog of
accelerator types and runtime versions, the API's errors), and the read-only methods.

https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations
Operations are google.longrunning.Operation named projects/p/locations/<zone>/operations/<id>,
metadata google.cloud.tpu.v2.OperationMetadata, the resource (a Node, a QueuedResource) as the
response of a create (the Terraform provider reads it from there: "resource_inside_response").
Accelerator types and runtime versions: the simulator's facts/tpus.py, in the zones it lists.
Errors (google.rpc.Status):
  - an accelerator type the zone lacks: 400 "Cloud TPU received a bad request. the accelerator
    v4-128 was not found in zone us-central2-b [EID: 0x...]" (https://github.com/skypilot-org/skypilot/issues/3840);
  - a runtime version the type cannot run: 400, worded as the API words a bad version field
    ('Cloud TPU received an invalid argument. The field "TensorflowVersion" cannot be "2.4".',
    https://github.com/tensorflow/tpu/issues/877) with RuntimeVersion;
  - quota: 429 RESOURCE_EXHAUSTED "Quota limit 'TPUV5sLitepodPerProjectPerZoneForTPUAPI' has been
    exceeded. Limit: 0 in zone us-west4-a." at create (https://github.com/marin-community/marin/pull/1612;
    the zone form: BioMedBERT/biomedbert nohup.out "...PerZoneForTPUAPI' has been exceeded.
    Limit: 0,0 in region us-central1,zone us-central1-a"), with a google.rpc.QuotaFailure
    detail ("Quota 'X' exhausted. Limit 4 in zone us-central1-a", subject project:<number>);
    limit ids per generation and spot as the TPU API names them (TPUV5sLitepod..., TPUV5sPreemptibleLitepod...,
    TPUV6E..., TPUV6EPreemptible..., TPUV4sPod..., TPUV4sPreemptiblePod..., TPUV5P..., TPUV5PPreemptible...);
    units: chips (v5e, v6e), TensorCores (v4, v5p); limits are the project file's, under the
    zone (`quotas: {us-west4-a: {TPUV5sLitepodPerProjectPerZoneForTPUAPI: 16}}`); unset: no limit;
  - stockout: the create operation fails, code 8 (RESOURCE_EXHAUSTED), 'There is no more
    capacity in the zone "z"; you can try in another zone where Cloud TPU Nodes are offered (see
    https://cloud.google.com/tpu/docs/regions) [EID: 0x...]'
    (https://github.com/hashicorp/terraform-provider-google/issues/21243), or, where the project
    file's stockout says `tpu_words: insufficient_reserved_capacity`, 'Insufficient reserved
    capacity. Contact customer support to increase your reservation. [EID: 0x...]', code 8, for
    a create that used no reservation (https://github.com/skypilot-org/skypilot/issues/4579).
"""

from __future__ import annotations

import hashlib
from typing import Any

from gcpsim import operations
from gcpsim.apis.compute_common import region_of
from gcpsim.errors import ApiError, not_found
from gcpsim.facts import tpus as tpu_facts
from gcpsim.facts.tpus import TPUS, TpuType
from gcpsim.facts.zones import TPU_ZONES
from gcpsim.routes import Call, handles
from gcpsim.state import World

API = "tpu.v2"
NODE_TYPE = "type.googleapis.com/google.cloud.tpu.v2.Node"
QR_TYPE = "type.googleapis.com/google.cloud.tpu.v2.QueuedResource"
CONFIG_TYPES = {"v5e": "V5LITE_POD", "v6e": "V6E", "v4": "V4", "v5p": "V5P"}


def eid(*parts: str) -> str:
    """The error id the TPU API appends to its messages."""
    return "0x" + hashlib.sha256("/".join(parts).encode()).hexdigest()[:16]


def parent_of(call: Call) -> tuple[str, str]:
    """(project, zone) of a `parent` (projects/p/locations/z); `-` lists every zone."""
    parts = call.params["parent"].split("/")
    return call.project_id, parts[3]


def split_name(call: Call) -> tuple[str, str, str]:
    """(project, zone, id) of a `name` (projects/p/locations/z/<collection>/id)."""
    parts = call.params["name"].split("/")
    return call.project_id, parts[3], parts[5]


def check_location(project: str, zone: str) -> None:
    if zone not in TPU_ZONES:
        # tpu.projects.locations.get of an unknown location: the API's NOT_FOUND.
        raise not_found(f"projects/{project}/locations/{zone}")


# -- catalog ----------------------------------------------------------------------------------

def tpu_type(zone: str, body: dict[str, Any], project: str, key: str) -> TpuType:
    """The node's TPU type from acceleratorType or acceleratorConfig, valid in the zone."""
    config = body.get("acceleratorConfig")
    name = body.get("acceleratorType") or ("" if config else "v2-8")
    if config and not body.get("acceleratorType"):
        gen = next((g for g, t in CONFIG_TYPES.items() if t == config.get("type")), None)
        match = [t for t in TPUS.values() if t.generation == gen and t.topology == config.get("topology")]
        name = match[0].name if match else f"{config.get('type')}:{config.get('topology')}"
    t = TPUS.get(name)
    if t is None or zone not in t.zones:
        raise ApiError(400, f"Cloud TPU received a bad request. the accelerator {name} was not found in zone "
                            f"{zone} [EID: {eid(project, zone, key)}]")
    runtime = body.get("runtimeVersion")
    if not runtime or runtime not in t.runtime_versions:
        raise ApiError(400, f'Cloud TPU received an invalid argument. The field "RuntimeVersion" cannot be '
                            f'"{runtime or ""}". [EID: {eid(project, zone, key, "runtime")}]')
    return t


def quota_units(t: TpuType) -> int:
    return tpu_facts.quota_units(t)


def quota_error(world: World, project: dict[str, Any], zone: str, t: TpuType, spot: bool,
                used: int) -> ApiError | None:
    """The 429 a create answers when the zone's TPU quota cannot take `t` on top of `used`."""
    limit_id = tpu_facts.quota_id(t, spot)
    limit = project.get("quotas", {}).get(zone, {}).get(limit_id)
    if limit is None or used + quota_units(t) <= float(limit):
        return None
    shown = f"{float(limit):g}"
    return ApiError(429, f"Quota limit '{limit_id}' has been exceeded. Limit: {shown} in zone {zone}.",
                    details=[{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                        {"subject": f"project:{project['number']}",
                         "description": f"Quota '{limit_id}' exhausted. Limit {shown} in zone {zone}"}]}])


def stockout_error(project: str, zone: str, key: str, words: str = "no_more_capacity") -> ApiError:
    """The create's refusal in the words the project file's stockout names (project.py Stockout)."""
    if words == "insufficient_reserved_capacity":  # skypilot-org/skypilot#4579: code 8, no reservation used
        text = "Insufficient reserved capacity. Contact customer support to increase your reservation."
    else:
        text = (f'There is no more capacity in the zone "{zone}"; you can try in another zone where '
                "Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions)")
    return ApiError(429, f"{text} [EID: {eid(project, zone, key, 'capacity')}]", status="RESOURCE_EXHAUSTED")


def _accelerator_type(project: str, zone: str, t: TpuType) -> dict[str, Any]:
    return {"name": f"projects/{project}/locations/{zone}/acceleratorTypes/{t.name}", "type": t.name,
            "acceleratorConfigs": [{"type": CONFIG_TYPES[t.generation], "topology": t.topology}]}


@handles("tpu.projects.locations.acceleratorTypes.list")
def list_accelerator_types(call: Call) -> Any:
    project, zone = parent_of(call)
    check_location(project, zone)
    return {"acceleratorTypes": [_accelerator_type(project, zone, t) for t in TPUS.values()
                                 if zone in t.zones]}


@handles("tpu.projects.locations.acceleratorTypes.get")
def get_accelerator_type(call: Call) -> Any:
    project, zone, name = split_name(call)
    t = TPUS.get(name)
    if t is None or zone not in t.zones:
        raise not_found(call.params["name"])
    return _accelerator_type(project, zone, t)


def _runtimes(zone: str) -> list[str]:
    return sorted({r for t in TPUS.values() if zone in t.zones for r in t.runtime_versions})


@handles("tpu.projects.locations.runtimeVersions.list")
def list_runtime_versions(call: Call) -> Any:
    project, zone = parent_of(call)
    check_location(project, zone)
    return {"runtimeVersions": [{"name": f"projects/{project}/locations/{zone}/runtimeVersions/{r}", "version": r}
                                for r in _runtimes(zone)]}


@handles("tpu.projects.locations.runtimeVersions.get")
def get_runtime_version(call: Call) -> Any:
    project, zone, version = split_name(call)
    if version not in _runtimes(zone):
        raise not_found(call.params["name"])
    return {"name": call.params["name"], "version": version}


def _location(project: str, zone: str) -> dict[str, Any]:
    return {"name": f"projects/{project}/locations/{zone}", "locationId": zone,
            "labels": {"cloud.googleapis.com/region": region_of(zone)}}


@handles("tpu.projects.locations.list")
def list_locations(call: Call) -> Any:
    project = call.project_id
    return {"locations": [_location(project, z) for z in TPU_ZONES]}


@handles("tpu.projects.locations.get")
def get_location(call: Call) -> Any:
    parts = call.params["name"].split("/")
    check_location(call.project_id, parts[3])
    return _location(call.project_id, parts[3])


# -- operations -------------------------------------------------------------------------------

def start_op(call_or_world: Call | World, project: str, zone: str, verb: str, target: str, *, kind: str,
             now: float, then: str | None = None, args: dict[str, Any] | None = None,
             after: float | None = None) -> dict[str, Any]:
    world = call_or_world.world if isinstance(call_or_world, Call) else call_or_world
    op = operations.start(world, api=API, project=project, kind=kind, target=target, scope=zone, then=then,
                          args=args, after=after, now=now,
                          metadata={"@type": "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata",
                                    "createTime": operations.rfc3339(now), "target": target, "verb": verb,
                                    "apiVersion": "v2"})
    return render_op(op)


def render_op(op: dict[str, Any]) -> dict[str, Any]:
    meta = dict(op["metadata"])
    if op["done"]:
        meta["endTime"] = operations.rfc3339(op["done_at"])
    full = f"projects/{op['project']}/locations/{op['scope']}/operations/{op['name']}"
    return operations.as_longrunning({**op, "metadata": meta}, full)


def _is_tpu_op(world: World, params: dict[str, str]) -> bool:
    op = operations.find(world, params["name"])
    return op is not None and op["api"] == API


def _op(call: Call) -> dict[str, Any]:
    op = operations.find(call.world, call.params["name"])
    parts = call.params["name"].split("/")
    if op is None or op["api"] != API or op["scope"] != parts[3] or op["project"] != call.project_id:
        raise ApiError(404, f"Operation \"{call.params['name']}\" not found.")
    return op


@handles("tpu.projects.locations.operations.get", claims=_is_tpu_op)
def get_operation(call: Call) -> Any:
    return render_op(_op(call))


@handles("tpu.projects.locations.operations.list")
def list_operations(call: Call) -> Any:
    parts = call.params["name"].split("/")
    return {"operations": [render_op(op) for op in call.world.operations().values()
                           if op["api"] == API and op["project"] == call.project_id and parts[3] in ("-", op["scope"])]}


@handles("tpu.projects.locations.operations.delete", claims=_is_tpu_op)
def delete_operation(call: Call) -> Any:
    del call.world.operations()[_op(call)["name"]]
    return {}


@handles("tpu.projects.locations.operations.cancel", claims=_is_tpu_op)
def cancel_operation(call: Call) -> Any:
    _op(call)["metadata"]["cancelRequested"] = True
    return {}
