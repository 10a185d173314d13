"""Where the program's provider sends each Google API's requests.

Unset, the provider uses Google's endpoints. With TRAINCTL_GCP_API_ENDPOINT set (a private
endpoint that serves every API the program calls, e.g. trainctl's GCP simulator), the program
declares one explicit provider whose custom endpoints all derive from that one setting, each
API under the path Google serves its version at, and every resource uses that provider.
"""

from __future__ import annotations

import os
from typing import Any

import pulumi_gcp as gcp

from infra.providers.gcp.reaper import API_ENDPOINT_ENV

# pulumi-gcp provider argument -> the path of the API version under the endpoint. Each is the
# provider setting the resources of the program are read and written through (checked in the
# provider's source: e.g. service accounts go through iam_beta_custom_endpoint, GKE's client
# drops the version and adds its own). An argument's value must end with '/'.
API_PATHS = {
    "compute_custom_endpoint": "compute/v1/",
    "tpu_v2_custom_endpoint": "v2/",
    "container_custom_endpoint": "v1/",
    "storage_custom_endpoint": "storage/v1/",
    "service_usage_custom_endpoint": "v1/",
    "resource_manager_custom_endpoint": "v1/",
    "resource_manager_v3_custom_endpoint": "v3/",
    "iam_custom_endpoint": "v1/",
    "iam_beta_custom_endpoint": "v1/",
    "artifact_registry_custom_endpoint": "v1/",
    "cloudfunctions2_custom_endpoint": "v2/",
    "cloud_run_v2_custom_endpoint": "v2/",
    "cloud_scheduler_custom_endpoint": "v1/",
}


def custom_endpoints(base: str) -> dict[str, str]:
    root = base.rstrip("/") + "/"
    return {argument: root + path for argument, path in API_PATHS.items()}


def api_provider() -> gcp.Provider | None:
    """The provider every resource uses when the APIs live at a custom endpoint, else None
    (Google's endpoints, the default provider)."""
    base = os.environ.get(API_ENDPOINT_ENV)
    if not base:
        return None
    endpoints: dict[str, Any] = custom_endpoints(base)
    return gcp.Provider("gcp-api-endpoint", gcp.ProviderArgs(**endpoints))
