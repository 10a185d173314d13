"""Errors as Google's APIs answer them.

Two body shapes exist (https://cloud.google.com/apis/design/errors):
  - google.rpc.Status, as the newer APIs answer: {"error": {"code", "message", "status",
    "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason", "domain",
    "metadata"}, ...]}};
  - Compute Engine and Cloud Storage add the older `errors` list ({"message", "domain",
    "reason"}) beside code and message (and status/details where the front end adds them,
    e.g. SERVICE_DISABLED).
An ApiError carries both halves; the server renders it in the shape of the API that was called.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# google.rpc.Code names by HTTP status, as the mapping in google/rpc/code.proto gives them.
STATUS_OF = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
             404: "NOT_FOUND", 409: "ALREADY_EXISTS", 412: "FAILED_PRECONDITION",
             429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 501: "UNIMPLEMENTED", 503: "UNAVAILABLE"}
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
HELP = "type.googleapis.com/google.rpc.Help"


class SimulatorError(Exception):
    """The simulator itself failed or was misused (not an API answer): it cannot start, a
    project file is invalid, a machine has nothing to plug into."""


@dataclass
class ApiError(Exception):
    code: int
    message: str
    status: str = ""
    reason: str | None = None  # the legacy `errors[].reason` (compute, storage)
    domain: str = "global"
    details: list[dict[str, Any]] = field(default_factory=list)
    # The `errors` list even on an API that answers google.rpc.Status: GKE's FAILED_PRECONDITION
    # carries one (Go clients print "googleapi: Error 400: ..., failedPrecondition":
    # https://github.com/hashicorp/terraform-provider-google/issues/3650).
    with_errors: bool = False

    def __post_init__(self) -> None:
        super().__init__(self.message)
        self.status = self.status or STATUS_OF.get(self.code, "UNKNOWN")

    def body(self, legacy: bool) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if legacy or self.with_errors:
            error["errors"] = [{"message": self.message, "domain": self.domain,
                                "reason": self.reason or _legacy_reason(self.code)}]
        if not legacy or self.details:
            error["status"] = self.status
        if self.details:
            error["details"] = self.details
        return {"error": error}


def _legacy_reason(code: int) -> str:
    return {400: "invalid", 403: "forbidden", 404: "notFound", 409: "alreadyExists",
            412: "conditionNotMet", 501: "notImplemented"}.get(code, "backendError")


def invalid_argument(message: str, reason: str = "invalid") -> ApiError:
    return ApiError(400, message, reason=reason)


def not_found(resource: str) -> ApiError:
    """Compute's wording; the newer APIs name the resource the same way."""
    return ApiError(404, f"The resource '{resource}' was not found", reason="notFound")


def already_exists(resource: str) -> ApiError:
    return ApiError(409, f"The resource '{resource}' already exists", reason="alreadyExists")


def unimplemented(method_id: str) -> ApiError:
    return ApiError(501, f"{method_id} is not simulated (trainctl's GCP simulator answers only "
                         "what trainctl and its Pulumi program call)", reason="notImplemented")


def service_disabled(service: str, project_number: int, title: str) -> ApiError:
    """What every Google API answers when the consumer project has not enabled it."""
    console = f"https://console.developers.google.com/apis/api/{service}/overview?project={project_number}"
    message = (f"{title} has not been used in project {project_number} before or it is disabled. "
               f"Enable it by visiting {console} then retry. If you enabled this API recently, "
               "wait a few minutes for the action to propagate to our systems and retry.")
    return ApiError(403, message, reason="accessNotConfigured", domain="usageLimits", details=[
        {"@type": ERROR_INFO, "reason": "SERVICE_DISABLED", "domain": "googleapis.com",
         "metadata": {"service": service, "consumer": f"projects/{project_number}",
                      "serviceTitle": title, "containerInfo": str(project_number),
                      "activationUrl": console}},
        {"@type": HELP, "links": [{"description": "Google developers console API activation",
                                   "url": console}]}])
