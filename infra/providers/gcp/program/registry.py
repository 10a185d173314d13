"""The stack's Artifact Registry repository: where `trainctl build` pushes the experiment's
images, readable by the cluster's service account only (VMs pull with its token from the
metadata server, GKE nodes with their node identity)."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.providers.gcp.program.common import TYPE_PREFIX, child_opts
from infra.providers.gcp.program.network import region_of
from infra.spec.cluster import ClusterSpec


def repository_id(spec: ClusterSpec) -> str:
    # Artifact Registry: lowercase letters, digits and hyphens, a letter first, at most 63.
    return f"{spec.name}-images"[:63].rstrip("-")


def repository_path(spec: ClusterSpec) -> str:
    """What image names start with: <region>-docker.pkg.dev/<project>/<repository>."""
    assert spec.zone
    return f"{region_of(spec.zone)}-docker.pkg.dev/{spec.project}/{repository_id(spec)}"


class ImageRegistry(pulumi.ComponentResource):
    def __init__(self, name: str, spec: ClusterSpec, labels: dict[str, str], reader: pulumi.Input[str],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{TYPE_PREFIX}:ImageRegistry", name, None, opts)
        child = child_opts(self, opts)
        assert spec.zone
        self.repository = gcp.artifactregistry.Repository(
            f"{name}-images", repository_id=repository_id(spec), format="DOCKER",
            location=region_of(spec.zone), project=spec.project, labels=labels,
            description=f"trainctl images of stack {spec.name}", opts=child)
        gcp.artifactregistry.RepositoryIamMember(
            f"{name}-images-reader", repository=self.repository.name, location=self.repository.location,
            project=spec.project, role="roles/artifactregistry.reader", member=reader, opts=child)
        self.path = repository_path(spec)
        self.register_outputs({"path": self.path})
