"""The names GKE knows a stack's cluster and node pools by: what the GCP program declares and what
a Job's pods select their node pool by (the `cloud.google.com/gke-nodepool` node label is the
pool's name), so both read them here."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from infra.spec import catalog

if TYPE_CHECKING:
    from infra.spec.cluster import ClusterSpec

# GKE's limit for cluster and node pool names (the API refuses longer ones):
# https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#Cluster
GKE_NAME_MAX = 40
# The label GKE puts on every node with its node pool's name.
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
# A Kueue LocalQueue or a PriorityClass named in a stack or an experiment: an RFC 1123 label (both
# are object names, and the queue's name is also the value of the `kueue.x-k8s.io/queue-name`
# label, which allows 63 characters): https://kubernetes.io/docs/concepts/overview/working-with-objects/names/
KUBE_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def kube_name(value: str | None, field: str) -> str | None:
    if value is not None and not KUBE_NAME_RE.match(value):
        raise ValueError(f"{field} {value!r}: a Kubernetes object name (lowercase letters, digits and '-', "
                         "at most 63, starting and ending with a letter or digit)")
    return value


def bounded(name: str, limit: int = GKE_NAME_MAX) -> str:
    """`name`, or where it is too long its head and a digest of the whole (still unique)."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:6]
    return f"{name[:limit - 7].rstrip('-')}-{digest}"


def cluster_name(spec: ClusterSpec) -> str:
    return bounded(f"{spec.name}-gke")


def pool_name(spec: ClusterSpec, pool: str) -> str:
    return bounded(f"{spec.name}-{pool}")


def pool_layout(spec: ClusterSpec) -> list[tuple[str, int]]:
    """(pool, node count) pairs: a multi-host TPU pool holds exactly one slice, so its node count
    is the slice's host count and each slice gets a pool of its own (pool-<slice>)."""
    if spec.tpu and catalog.TPUS[spec.tpu.type].multi_host:
        hosts = catalog.TPUS[spec.tpu.type].hosts
        return [(f"pool-{i}", hosts) for i in range(spec.node_count // hosts)]
    return [("pool", spec.node_count)]


def slice_pool(spec: ClusterSpec, index: int) -> str:
    """The name of the node pool that holds TPU slice `index` of a multi-host TPU stack."""
    return pool_name(spec, pool_layout(spec)[index][0])
