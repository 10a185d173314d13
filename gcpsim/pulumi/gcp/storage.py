"""Cloud Storage: google_storage_bucket and google_storage_bucket_object
(services/storage/resource_storage_bucket.go, resource_storage_bucket_object.go).

A bucket is created with buckets.insert (its error returned as the API gave it), then read
back with buckets.get; updates PATCH the changed fields (labels the program dropped are sent as
null, which removes them); delete lists the bucket's objects (all versions) and refuses while
any exist unless force_destroy, deleting each object first when it is set, then deletes the
bucket. An object is uploaded with objects.insert (a multipart media upload under
/upload/storage/v1/, as the Go client sends it) from `content` or `source`; pulumi-gcp gives
`source` as an archive, which the bridge writes out as a zip file. Any change of name, bucket,
content or source replaces the object. Not modelled: Anywhere Cache listing before a delete.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from gcpsim.pulumi.gcp.base import GcpResource, drop_empty, failing_as
from gcpsim.pulumi.gcp.rest import GoogleApiError
from gcpsim.pulumi.plugins import Diff, ProviderError
from gcpsim.pulumi.properties import ARCHIVE_SIG, ASSET_SIG, SIG

STORAGE_DEFAULT = "https://storage.googleapis.com/storage/v1/"


class Bucket(GcpResource):
    token = "gcp:storage/bucket:Bucket"
    endpoint = "storageCustomEndpoint"
    default_url = STORAGE_DEFAULT
    autoname_max = 222
    force_new = frozenset({"name", "location", "project", "enableObjectRetention", "hierarchicalNamespace"})

    def suppress(self, path: str, new: Any, old: Any) -> bool:
        if path == "location":  # its StateFunc upper-cases it
            return str(new).upper() == str(old).upper()
        return False

    def _body(self, inputs: dict[str, Any], labels: dict[str, str] | None) -> dict[str, Any]:
        iam = drop_empty({
            "uniformBucketLevelAccess": {"enabled": bool(inputs["uniformBucketLevelAccess"])}
            if "uniformBucketLevelAccess" in inputs else None,
            "publicAccessPrevention": inputs.get("publicAccessPrevention")})
        return drop_empty({
            "name": inputs["name"], "location": inputs.get("location"), "labels": labels,
            "storageClass": inputs.get("storageClass"), "iamConfiguration": iam,
            "lifecycle": {"rule": [_rule(r) for r in inputs.get("lifecycleRules") or []]}
            if inputs.get("lifecycleRules") is not None else None,
            "versioning": {"enabled": bool(inputs["versioning"].get("enabled"))} if inputs.get("versioning") else None})

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        project = self.project(inputs)
        body = self._body(inputs, self.labels_on_create(inputs.get("labels")))
        created = self.rest.call("POST", self.url("b"), body, {"project": project})
        with failing_as("Error reading bucket after creation"):
            self.rest.get(self.url(f"b/{quote(created['name'], safe='')}"))
        found = self.read(created.get("id") or created["name"], inputs, inputs)
        return created.get("id") or created["name"], found or inputs

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        name = inputs.get("name") or state.get("name") or id_
        found = self.fetch(self.url(f"b/{quote(name, safe='')}"), f"Storage Bucket {name!r}")
        if found is None:
            return None
        project = inputs.get("project") or state.get("project") or self._project_of(found)
        iam = found.get("iamConfiguration") or {}
        return {**inputs, "id": found.get("id", name), "name": found["name"], "project": project,
                "projectNumber": found.get("projectNumber"), "location": found.get("location"),
                "selfLink": found.get("selfLink"), "url": f"gs://{found['name']}",
                "storageClass": found.get("storageClass"),
                "uniformBucketLevelAccess": bool((iam.get("uniformBucketLevelAccess") or {}).get("enabled")),
                "publicAccessPrevention": iam.get("publicAccessPrevention"),
                "lifecycleRules": [_flat_rule(r) for r in (found.get("lifecycle") or {}).get("rule") or []],
                "forceDestroy": bool(inputs.get("forceDestroy", state.get("forceDestroy", False))),
                **self.labels_outputs(inputs.get("labels"), found.get("labels"))}

    def _project_of(self, found: dict[str, Any]) -> str:
        """With no project in the inputs (an import), the provider asks Compute for the project
        of the bucket's project number."""
        compute = str(self.config.get("computeCustomEndpoint") or "https://compute.googleapis.com/compute/beta/")
        try:
            return str(self.rest.get(f"{compute}projects/{found.get('projectNumber')}").get("name", ""))
        except ProviderError:
            return str(self.config.get("project") or "")

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        changed = {p.split(".")[0] for p in diff.changed}
        body = {k: v for k, v in self._body(news, None).items() if k in _api_fields(changed)}
        if "labels" in changed:
            labels = self.labels_on_update(news.get("labels"), state.get("effectiveLabels") or {})
            body["labels"] = {**{k: None for k in state.get("effectiveLabels") or {} if k not in labels}, **labels}
        if body:
            with failing_as(f"Error updating bucket {news['name']}"):
                self.rest.call("PATCH", self.url(f"b/{quote(news['name'], safe='')}"), body)
        return self.read(id_, news, state) or state

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        name = state.get("name") or id_
        objects = self._objects(name)
        if objects and not state.get("forceDestroy"):
            raise ProviderError(f"Error trying to delete bucket {name} without `force_destroy` set to true")
        for item in objects:
            self.rest.call("DELETE", self.url(f"b/{quote(name, safe='')}/o/{quote(item['name'], safe='')}"),
                           query={"generation": str(item.get("generation", ""))} if item.get("generation") else None)
        try:
            self.rest.call("DELETE", self.url(f"b/{quote(name, safe='')}"))
        except GoogleApiError as exc:
            if exc.code != 404:
                raise ProviderError(f"Error deleting Storage Bucket {name!r}: {exc}") from None

    def _objects(self, bucket: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            try:
                page = self.rest.get(self.url(f"b/{quote(bucket, safe='')}/o"),
                                     {"versions": "true", **({"pageToken": token} if token else {})})
            except GoogleApiError as exc:
                if exc.code == 404:
                    return items
                raise
            items += page.get("items") or []
            token = page.get("nextPageToken") or ""
            if not token:
                return items


def _api_fields(changed: set[str]) -> set[str]:
    names = {"uniformBucketLevelAccess": "iamConfiguration", "publicAccessPrevention": "iamConfiguration",
             "lifecycleRules": "lifecycle", "storageClass": "storageClass", "versioning": "versioning"}
    return {names[c] for c in changed if c in names}


def _rule(rule: dict[str, Any]) -> dict[str, Any]:
    action = rule.get("action") or {}
    condition = rule.get("condition") or {}
    return {"action": drop_empty({"type": action.get("type"), "storageClass": action.get("storageClass")}),
            "condition": drop_empty({"age": condition.get("age"), "createdBefore": condition.get("createdBefore"),
                                     "numNewerVersions": condition.get("numNewerVersions"),
                                     "withState": condition.get("withState"),
                                     "matchesStorageClass": condition.get("matchesStorageClasses")})}


def _flat_rule(rule: dict[str, Any]) -> dict[str, Any]:
    condition = rule.get("condition") or {}
    return {"action": drop_empty(dict(rule.get("action") or {})),
            "condition": drop_empty({"age": condition.get("age"), "createdBefore": condition.get("createdBefore"),
                                     "numNewerVersions": condition.get("numNewerVersions"),
                                     "withState": condition.get("withState"),
                                     "matchesStorageClasses": condition.get("matchesStorageClass")})}


class BucketObject(GcpResource):
    token = "gcp:storage/bucketObject:BucketObject"
    endpoint = "storageCustomEndpoint"
    default_url = STORAGE_DEFAULT
    force_new = frozenset({"bucket", "name", "cacheControl", "contentDisposition", "contentEncoding",
                           "contentLanguage", "contentType", "content", "source", "storageClass", "kmsKeyName",
                           "metadata", "customerEncryption", "detectMd5hash"})

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        bucket, name = inputs["bucket"], inputs["name"]
        media = _media(inputs)
        metadata = drop_empty({"bucket": bucket, "contentType": inputs.get("contentType"),
                               "cacheControl": inputs.get("cacheControl"), "metadata": inputs.get("metadata"),
                               "storageClass": inputs.get("storageClass")})
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Type: application/json\r\n\r\n{json.dumps(metadata)}\r\n"
                f"--{boundary}\r\nContent-Type: {inputs.get('contentType') or 'application/octet-stream'}\r\n\r\n"
                ).encode() + media + f"\r\n--{boundary}--\r\n".encode()
        root = self.base.split("/storage/v1/")[0] if "/storage/v1/" in self.base else self.base.rstrip("/")
        with failing_as(f"Error uploading object {name}"):
            self.rest.call("POST", f"{root}/upload/storage/v1/b/{quote(bucket, safe='')}/o",
                           query={"uploadType": "multipart", "name": name}, data=body,
                           content_type=f"multipart/related; boundary={boundary}")
        id_ = f"{bucket}-{name}"
        return id_, self.read(id_, inputs, inputs) or inputs

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        bucket, name = inputs.get("bucket") or state["bucket"], inputs.get("name") or state["name"]
        found = self.fetch(self.url(f"b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"),
                           f"Storage Bucket Object {name!r}")
        if found is None:
            return None
        md5 = found.get("md5Hash", "")
        return {**inputs, "id": id_, "bucket": bucket, "name": name, "outputName": found.get("name"),
                "md5hash": md5, "md5hexhash": base64.b64decode(md5).hex() if md5 else "",
                "detectMd5hash": md5, "crc32c": found.get("crc32c"), "generation": found.get("generation"),
                "contentType": found.get("contentType"), "storageClass": found.get("storageClass"),
                "selfLink": found.get("selfLink"), "mediaLink": found.get("mediaLink")}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        return self.read(id_, news, state) or state  # holds and retention are not modelled

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        try:
            self.rest.call("DELETE", self.url(f"b/{quote(state['bucket'], safe='')}/o/{quote(state['name'], safe='')}"))
        except GoogleApiError as exc:
            if exc.code != 404:
                raise ProviderError(f"Error deleting contents of object {state['name']}: {exc}") from None


def _media(inputs: dict[str, Any]) -> bytes:
    if inputs.get("source") is not None:
        return archive_bytes(inputs["source"])
    if inputs.get("content") is not None:
        return str(inputs["content"]).encode()
    raise ProviderError('Error, either "content" or "source" must be specified')


def archive_bytes(value: Any) -> bytes:
    """An asset's bytes, or an archive as the zip file the bridge writes for it (entries in name
    order, fixed times, so the same contents give the same bytes)."""
    if isinstance(value, str):
        return Path(value).read_bytes()
    if value.get(SIG) == ASSET_SIG:
        return value["text"].encode() if "text" in value else Path(value["path"]).read_bytes()
    if value.get(SIG) == ARCHIVE_SIG and "assets" in value:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in sorted(value["assets"]):
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                archive.writestr(info, archive_bytes(value["assets"][name]))
        return buffer.getvalue()
    if value.get(SIG) == ARCHIVE_SIG and "path" in value:
        return Path(value["path"]).read_bytes()
    raise ProviderError(f"unsupported source {value!r}")


def content_hash(value: Any) -> str:
    return hashlib.sha256(archive_bytes(value)).hexdigest()


TYPES = (Bucket, BucketObject)
