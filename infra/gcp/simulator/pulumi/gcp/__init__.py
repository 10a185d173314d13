"""The pulumi-gcp provider stand-in (filled in per resource type)."""

from __future__ import annotations

from infra.gcp.simulator.pulumi.plugins import PackageFactory

PACKAGES: dict[str, PackageFactory] = {}
