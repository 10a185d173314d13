"""What every pulumi-gcp resource stand-in shares: the endpoint its Terraform resource calls
(the provider's `<product>_custom_endpoint`, else the product's default base URL, as
transport_tpg.BaseUrl picks it), the project/region/zone defaults of the provider
(tpgresource.GetProject/GetRegion/GetZone), self-link comparison
(tpgresource.CompareSelfLinkOrResourceName), and labels as the provider manages them since
v5: `labels` holds what the program set, `effectiveLabels` what the resource carries,
including the attribution label pulumi-gcp renames to goog-pulumi-provisioned (its patch
0006 of the provider's transport.AttributionKey), added when a resource is created
(the default "CREATION_ONLY" strategy of add_terraform_attribution_label).
"""

from __future__ import annotations

import re
import time
from contextlib import contextmanager
from typing import Any, ClassVar, Iterator

from gcpsim.pulumi.gcp.rest import (
    DEFAULT_TIMEOUT_SECONDS, GoogleApiError, Rest, compute_operation_error, poll)
from gcpsim.pulumi.plugins import BridgedResource, ProviderError

ATTRIBUTION = {"goog-pulumi-provisioned": "true"}
_LINK = re.compile(r"^https?://[^/]+/(?:compute/|storage/)?(?:v1|beta|alpha|v1beta1|v2|v2alpha1|v3)/")


def relative(link: str) -> str:
    """projects/p/global/networks/n for a self link, a relative link or a bare path."""
    return _LINK.sub("", str(link or ""))


def same_resource(new: Any, old: Any) -> bool:
    """CompareSelfLinkOrResourceName: equal as links, or by name where one is only a name."""
    if not isinstance(new, str) or not isinstance(old, str):
        return bool(new == old)
    a, b = relative(new), relative(old)
    if "/" not in a or "/" not in b:
        return a.rsplit("/", 1)[-1] == b.rsplit("/", 1)[-1]
    return a == b


def last(link: str) -> str:
    return str(link or "").rstrip("/").rsplit("/", 1)[-1]


@contextmanager
def failing_as(prefix: str) -> Iterator[None]:
    """The provider's `fmt.Errorf("<prefix>: %s", err)` around a call."""
    try:
        yield
    except ProviderError as exc:
        raise ProviderError(f"{prefix}: {exc}", exc.partial) from None


def drop_empty(values: dict[str, Any]) -> dict[str, Any]:
    """The request body as expand functions build it: unset and empty values are not sent."""
    return {k: v for k, v in values.items() if v not in (None, "", [], {})}


class GcpResource(BridgedResource):
    endpoint: ClassVar[str] = ""  # the provider input naming the API's custom endpoint
    default_url: ClassVar[str] = ""  # the product's BaseUrl in the provider
    go_client_version: ClassVar[str | None] = None  # a generated Go client drops the version, adds its own
    self_links: ClassVar[frozenset[str]] = frozenset()  # inputs compared as links
    labels_field: ClassVar[str | None] = None

    def __init__(self, package: Any) -> None:
        self.config: dict[str, Any] = package.config
        self.rest: Rest = package.rest

    # -- where requests go --------------------------------------------------------------------

    @property
    def base(self) -> str:
        url = str(self.config.get(self.endpoint) or self.default_url)
        if self.go_client_version is not None:  # transport_tpg.RemoveBasePathVersion
            url = re.sub(r"/[^/]+?/$", "/", url) + self.go_client_version + "/"
        return url

    def url(self, path: str) -> str:
        return self.base + path

    def project(self, inputs: dict[str, Any]) -> str:
        project = inputs.get("project") or self.config.get("project")
        if not project:
            raise ProviderError("project: required field is not set")
        return str(project)

    def region(self, inputs: dict[str, Any], field: str = "region") -> str:
        region = inputs.get(field) or self.config.get("region")
        if not region:
            raise ProviderError("Cannot determine region: set in this resource, or set provider-level "
                                "'region' or 'zone'.")
        return last(str(region))

    def zone(self, inputs: dict[str, Any]) -> str:
        zone = inputs.get("zone") or self.config.get("zone")
        if not zone:
            raise ProviderError("Cannot determine zone: set in this resource, or set provider-level zone.")
        return last(str(zone))

    # -- diffs ----------------------------------------------------------------------------------

    def suppress(self, path: str, new: Any, old: Any) -> bool:
        if path in self.self_links:
            return same_resource(new, old)
        return False

    # -- labels ---------------------------------------------------------------------------------

    def labels_on_create(self, labels: dict[str, str] | None) -> dict[str, str] | None:
        if labels is None and not self._attributes():
            return None
        return {**self._default_labels(), **(labels or {}), **self._attributes()}

    def labels_on_update(self, labels: dict[str, str] | None, effective: dict[str, str]) -> dict[str, str]:
        """The new effective labels: defaults and the program's, the attribution kept where the
        resource has it (labels the provider does not manage are left as they are)."""
        kept = {k: v for k, v in effective.items() if k in ATTRIBUTION}
        return {**self._default_labels(), **(labels or {}), **kept}

    def labels_outputs(self, declared: dict[str, str] | None, actual: dict[str, str] | None) -> dict[str, Any]:
        actual = dict(actual or {})
        return {"labels": {k: actual[k] for k in (declared or {}) if k in actual},
                "effectiveLabels": actual,
                "pulumiLabels": {k: v for k, v in actual.items()
                                 if k in (declared or {}) or k in self._default_labels() or k in ATTRIBUTION}}

    def _default_labels(self) -> dict[str, str]:
        return dict(self.config.get("defaultLabels") or {})

    def _attributes(self) -> dict[str, str]:
        enabled = self.config.get("addPulumiAttributionLabel")
        return {} if enabled in (False, "false") else dict(ATTRIBUTION)

    # -- operations -----------------------------------------------------------------------------

    def wait_compute(self, op: dict[str, Any], project: str, activity: str,
                     timeout: float = DEFAULT_TIMEOUT_SECONDS) -> dict[str, Any]:
        """ComputeOperationWaitTime: poll the operation's zone, region or global collection
        within `timeout` (the caller's d.Timeout(...))."""
        def fetch() -> dict[str, Any]:
            if op.get("zone"):
                where = f"zones/{last(op['zone'])}"
            elif op.get("region"):
                where = f"regions/{last(op['region'])}"
            else:
                where = "global"
            return self.rest.get(self.url(f"projects/{project}/{where}/operations/{op['name']}"))

        if op.get("status") == "DONE":
            done = op
        else:
            done = poll(fetch, lambda o: o.get("status") == "DONE", activity, timeout)
            if done.get("error"):  # seen while polling: the waiter's "Error waiting for" prefix
                raise ProviderError(f"Error waiting for {activity}: {compute_operation_error(done['error'])}")
        if done.get("error"):
            raise ProviderError(compute_operation_error(done["error"]))
        return done

    def wait_lro(self, op: dict[str, Any], activity: str, base: str | None = None) -> dict[str, Any]:
        """A google.longrunning.Operation, polled by name (tpgresource.CommonOperationWaiter)."""
        root = base if base is not None else self.base
        polled = not op.get("done")
        if polled:
            op = poll(lambda: self.rest.get(root + op["name"]), lambda o: bool(o.get("done")) or bool(o.get("error")),
                      activity)
        if op.get("error"):
            error = op["error"]
            text = f"Error code {error.get('code', 0)}, message: {error.get('message', '')}"
            raise ProviderError(f"Error waiting for {activity}: {text}" if polled else text)
        return op

    def delete_request(self, url: str, kind: str) -> dict[str, Any] | None:
        """DELETE: its operation, or None where it is gone already (HandleNotFoundError)."""
        try:
            return self.rest.call("DELETE", url)  # type: ignore[no-any-return]
        except GoogleApiError as exc:
            if exc.code == 404:
                return None
            raise ProviderError(f"Error deleting {kind}: {exc}") from None

    def fetch(self, url: str, what: str) -> dict[str, Any] | None:
        """A resource's GET: None where it is gone, other errors worded as HandleNotFoundError."""
        with failing_as(f"Error when reading or editing {what}"):
            return self.read_or_none(url)

    def read_or_none(self, url: str) -> dict[str, Any] | None:
        try:
            return self.rest.get(url)
        except GoogleApiError as exc:
            if exc.code == 404:
                return None
            raise

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(seconds)
