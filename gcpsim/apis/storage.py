"""Cloud Storage JSON API v1: buckets (insert, get, list, patch, delete, IAM).

https://cloud.google.com/storage/docs/json_api/v1/buckets
Bucket names are global: one namespace across every simulated project (the world's `names`),
and a name stays taken while its bucket exists, so a bucket a stack kept on `down`
(`retain_on_delete`) makes the next `up`'s insert fail, as GCS answers it, with 409 "Your
previous request to create the named bucket succeeded and you already own it." when the bucket
is the inserting project's, and "The requested bucket name is not available. ..." when it is
another project's (the simulator judges ownership by project: it has no caller identity).
Deleting a bucket that holds objects is refused (409 "The bucket you tried to delete is not
empty."); objects live in the home's GCS emulator (storage_objects.py), which is asked.

A new bucket's IAM policy holds GCS's convenience bindings for the project's owners, editors
and viewers (https://cloud.google.com/storage/docs/access-control/iam#convenience-values); its
setIamPolicy takes Cloud Storage roles and custom roles only.
Chosen: the bucket ACL/notification methods are not simulated; a patch merges labels (a null
value removes one) and replaces the other fields it names; an update (PUT) replaces them all.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from gcpsim import operations, validation
from gcpsim.apis import iam_policy, storage_objects
from gcpsim.errors import ApiError, invalid_argument, service_disabled
from gcpsim.routes import Call, Raw, handles, raw
from gcpsim.state import World

if TYPE_CHECKING:
    from gcpsim.server import Simulator

# Object requests, which the home's GCS emulator answers: the JSON API's object paths, media
# uploads (simple, multipart, resumable sessions), media downloads, and batches.
OBJECT_PATH = re.compile(r"^/(?:upload/|resumable/upload/|download/)?storage/v1/b/(?P<bucket>[^/]+)/o(?:/.*)?$")
BATCH_PATH = "/batch/storage/v1"
NAMESPACE = "buckets"  # world.names(): bucket name -> project id
BUCKETS = "buckets"
MULTI_REGIONS = {"US", "EU", "ASIA"}
DUAL_REGIONS = {"NAM4", "EUR4", "ASIA1", "EUR5", "EUR7", "EUR8"}
# https://cloud.google.com/storage/docs/buckets#naming
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")
SETTABLE = ("labels", "lifecycle", "iamConfiguration", "storageClass", "versioning",
            "softDeletePolicy", "retentionPolicy", "cors", "website", "logging",
            "defaultEventBasedHold", "autoclass", "hierarchicalNamespace", "encryption", "billing",
            "customPlacementConfig", "rpo", "objectRetention")

# https://github.com/terraform-google-modules/terraform-google-cloud-storage/pull/238 (2023)
OWNED = "Your previous request to create the named bucket succeeded and you already own it."
# https://github.com/GoogleCloudPlatform/mlops-with-vertex-ai/issues/26 (2022)
TAKEN = ("The requested bucket name is not available. The bucket namespace is shared by all users "
         "of the system. Please select a different name and try again.")
# https://github.com/kestra-io/plugin-gcp/issues/321 (2024, the full JSON body: reason "conflict")
NOT_EMPTY = "The bucket you tried to delete is not empty."


def no_such_bucket() -> ApiError:
    # GCS JSON API's 404, as quoted in a user's log: "404 GET https://storage.googleapis.com/
    # storage/v1/b/<b>/o?...: The specified bucket does not exist."
    return ApiError(404, "The specified bucket does not exist.", reason="notFound")


def find(world: World, name: str) -> tuple[str, dict[str, Any]]:
    """(owning project id, bucket record); 404 as GCS answers, 403 where the owner's Storage
    API is off."""
    project_id = world.names(NAMESPACE).get(name)
    project = world.project(project_id) if project_id else None
    if project is None:
        raise no_such_bucket()
    if project["services"].get("storage.googleapis.com") != "ENABLED":
        raise service_disabled("storage.googleapis.com", project["number"], "Cloud Storage JSON API")
    return project["id"], world.collection(project["id"], BUCKETS)[name]


def _location_type(location: str) -> str:
    if location in MULTI_REGIONS:
        return "multi-region"
    return "dual-region" if location in DUAL_REGIONS else "region"


def _check_name(name: str) -> None:
    if not NAME.fullmatch(name) or name.startswith("goog") or "google" in name:
        # the wording GCS uses, as a user's log of a GCS answer quotes it
        raise invalid_argument(f"Invalid bucket name: '{name}'")


def _new_bucket(project: dict[str, Any], body: dict[str, Any], now: float, seq: int) -> dict[str, Any]:
    name = body["name"]
    location = (body.get("location") or "US").upper()
    at = operations.rfc3339(now)
    iam_config = body.get("iamConfiguration") or {}
    ubla = (iam_config.get("uniformBucketLevelAccess") or iam_config.get("bucketPolicyOnly") or {}).get("enabled", False)
    lock = {"lockedTime": operations.rfc3339(now + 90 * 86400)} if ubla else {}
    return {"kind": "storage#bucket", "id": name, "name": name, "projectNumber": str(project["number"]),
            "metageneration": "1", "location": location, "locationType": _location_type(location),
            "storageClass": body.get("storageClass") or "STANDARD", "etag": "CAE=",
            "timeCreated": at, "updated": at, "generation": str(seq),
            "softDeletePolicy": {"retentionDurationSeconds": "604800", "effectiveTime": at},
            **{k: body[k] for k in SETTABLE if k in body and k not in ("storageClass", "softDeletePolicy", "iamConfiguration")},
            "iamConfiguration": {"bucketPolicyOnly": {"enabled": ubla, **lock},
                                 "uniformBucketLevelAccess": {"enabled": ubla, **lock},
                                 "publicAccessPrevention": iam_config.get("publicAccessPrevention") or "inherited"}}


def render(call: Call, bucket: dict[str, Any]) -> dict[str, Any]:
    return {**bucket, "selfLink": f"{call.base_url}/storage/v1/b/{bucket['name']}"}


@handles("storage.buckets.insert")
def insert(call: Call) -> Any:
    body = call.body or {}
    name = body.get("name") or ""
    _check_name(name)
    project = call.world.project(call.arg("project") or "")
    assert project is not None  # admitted by the server
    owner = call.world.names(NAMESPACE).get(name)
    if owner is not None:
        raise ApiError(409, OWNED if owner == project["id"] else TAKEN, reason="conflict")
    bucket = _new_bucket(project, body, call.now, call.world.next_id())
    call.world.names(NAMESPACE)[name] = project["id"]
    call.world.collection(project["id"], BUCKETS)[name] = bucket
    policy = iam_policy.stored(call.world, project["id"], f"b/{name}")
    policy["bindings"] = _convenience_bindings(project["id"])
    return render(call, bucket)


def _convenience_bindings(project_id: str) -> list[dict[str, Any]]:
    return [{"role": "roles/storage.legacyBucketOwner",
             "members": [f"projectEditor:{project_id}", f"projectOwner:{project_id}"]},
            {"role": "roles/storage.legacyBucketReader", "members": [f"projectViewer:{project_id}"]}]


@handles("storage.buckets.get")
def get(call: Call) -> Any:
    return render(call, find(call.world, call.params["bucket"])[1])


@handles("storage.buckets.list")
def list_(call: Call) -> Any:
    project = call.world.project(call.arg("project") or "")
    assert project is not None
    buckets = call.world.collection(project["id"], BUCKETS)
    prefix = call.arg("prefix") or ""
    items = [render(call, buckets[n]) for n in sorted(buckets) if n.startswith(prefix)]
    return {"kind": "storage#buckets", **({"items": items} if items else {})}


@handles("storage.buckets.patch")
def patch(call: Call) -> Any:
    _, bucket = find(call.world, call.params["bucket"])
    body = call.body or {}
    if "labels" in body:
        labels = {**bucket.get("labels", {}), **(body["labels"] or {})}
        bucket["labels"] = {k: v for k, v in labels.items() if v is not None}
    for key in SETTABLE:
        if key in body and key != "labels":
            bucket[key] = _merged(bucket.get(key), body[key]) if key == "iamConfiguration" else body[key]
    return _touched(call, bucket)


@handles("storage.buckets.update")
def update(call: Call) -> Any:
    _, bucket = find(call.world, call.params["bucket"])
    body = call.body or {}
    for key in SETTABLE:
        if key == "iamConfiguration":
            bucket[key] = _merged(bucket.get(key), body.get(key) or {})
        elif key in body:
            bucket[key] = body[key]
        elif key not in ("storageClass", "softDeletePolicy"):  # kept by GCS when left out
            bucket.pop(key, None)
    return _touched(call, bucket)


def _touched(call: Call, bucket: dict[str, Any]) -> dict[str, Any]:
    bucket["metageneration"] = str(int(bucket["metageneration"]) + 1)
    bucket["etag"] = iam_policy.etag_for(call.world.next_id())
    bucket["updated"] = operations.rfc3339(call.now)
    return render(call, bucket)


def _merged(old: Any, new: Any) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        return {**old, **{k: _merged(old.get(k), v) for k, v in new.items()}}
    return new


@handles("storage.buckets.delete")
def delete(call: Call) -> Any:
    project_id, bucket = find(call.world, call.params["bucket"])
    if storage_objects.holds_objects(call.sim.home, bucket["name"]):
        raise ApiError(409, NOT_EMPTY, reason="conflict")
    storage_objects.forget_bucket(call.sim.home, bucket["name"])
    del call.world.collection(project_id, BUCKETS)[bucket["name"]]
    del call.world.names(NAMESPACE)[bucket["name"]]
    iam_policy.drop(call.world, project_id, f"b/{bucket['name']}")
    return Raw(b"", status=204)


def _bucket_policy(policy: dict[str, Any], name: str) -> dict[str, Any]:
    return {"kind": "storage#policy", "resourceId": f"projects/_/buckets/{name}", **policy}


@handles("storage.buckets.getIamPolicy")
def get_iam_policy(call: Call) -> Any:
    project_id, bucket = find(call.world, call.params["bucket"])
    return _bucket_policy(iam_policy.get(call.world, project_id, f"b/{bucket['name']}"), bucket["name"])


@handles("storage.buckets.setIamPolicy")
def set_iam_policy(call: Call) -> Any:
    project_id, bucket = find(call.world, call.params["bucket"])
    policy = iam_policy.set_policy(call.world, project_id, f"b/{bucket['name']}", call.body, kind="bucket")
    return _bucket_policy(policy, bucket["name"])


@raw
def objects(sim: Simulator, verb: str, target: str, body: bytes, headers: dict[str, str]
            ) -> tuple[int, dict[str, str], bytes] | None:
    """Object requests go to the emulator, after the checks the simulator owns: the query as
    the discovery document allows it, the bucket as the world has it. Outside the world's
    transaction: an upload does not hold up the rest of the cloud."""
    split = urlsplit(target)
    matched = OBJECT_PATH.match(split.path)
    if matched is None and split.path != BATCH_PATH:
        return None
    query = parse_qs(split.query, keep_blank_values=True)
    routes = sim.router.match(verb, split.path)
    # a resumable session's URI (upload_id=...) is opaque, whichever verb uses it
    if routes and "upload_id" not in query:
        validation.check_query(routes[0].method, query)
    bucket = unquote(matched["bucket"]) if matched else None
    if bucket is not None:
        with sim.store.transaction() as world:
            find(world, bucket)
    # the discovery document's resumable path is the upload path with uploadType=resumable
    target = target.replace("/resumable/upload/", "/upload/", 1) if target.startswith("/resumable/") else target
    return storage_objects.proxy(sim.home, bucket, verb, target, body, headers)
