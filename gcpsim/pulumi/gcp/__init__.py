"""The pulumi-gcp provider stand-in: each resource type the program declares, applied as the REST
calls the Terraform google-beta provider (which pulumi-gcp bridges) makes for it, against the
endpoints the provider resource names (`<product>CustomEndpoint` inputs). A type not listed
here fails its step, naming itself, rather than being skipped."""

from __future__ import annotations

from typing import Any

from gcpsim.pulumi.gcp import (
    container, functions, iam, instance, network, registry, resource_policy, services, storage, tpu)
from gcpsim.pulumi.gcp.rest import Rest
from gcpsim.pulumi.plugins import PackageFactory, ResourceType, unknown_type

TYPES: dict[str, type] = {cls.token: cls for module in (services, network, instance, storage, iam, registry, tpu,
                                                        container, functions, resource_policy)
                          for cls in module.TYPES}


class GcpPackage:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.rest = Rest()

    def resource(self, token: str) -> ResourceType:
        cls = TYPES.get(token)
        if cls is None:
            raise unknown_type(token, "gcp")
        return cls(self)  # type: ignore[no-any-return]


PACKAGES: dict[str, PackageFactory] = {"gcp": GcpPackage}
