"""What a rule reads: one resource as the Pulumi engine declares it (its type token and input
properties, camelCase keys, as the engine and infra/providers/gcp/program/mocks.py give them), GCP's
type tokens, and readers for property values as the engine hands them over (numbers as floats,
lists as read-only proxies, labels in whichever field the resource keeps them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class Resource:
    """One declared resource. `opts` holds resource options where the caller knows them
    (retainOnDelete, protect); the engine and the mocks may not, so rules never require it."""

    type: str
    name: str
    props: Mapping[str, Any]
    opts: Mapping[str, Any] = field(default_factory=dict)


T_INSTANCE = "gcp:compute/instance:Instance"
T_FIREWALL = "gcp:compute/firewall:Firewall"
T_BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM = ("gcp:storage/bucketIAMMember:BucketIAMMember", "gcp:storage/bucketIAMBinding:BucketIAMBinding")
T_CLUSTER = "gcp:container/cluster:Cluster"
T_NODEPOOL = "gcp:container/nodePool:NodePool"
T_TPU_VM = "gcp:tpu/v2Vm:V2Vm"
T_SERVICE = "gcp:projects/service:Service"
FUNCTION_V2_IAM = ("gcp:cloudfunctionsv2/functionIamMember:FunctionIamMember",
                   "gcp:cloudfunctionsv2/functionIamBinding:FunctionIamBinding")
T_AR_REPOSITORY = "gcp:artifactregistry/repository:Repository"
AR_IAM = ("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
          "gcp:artifactregistry/repositoryIamBinding:RepositoryIamBinding")


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    # pulumi_policy hands lists to a policy as a read-only Sequence proxy, not a list
    return list(value) if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) else []


def labels_of(props: Mapping[str, Any]) -> dict[str, Any]:
    """GCE-style labels wherever a resource carries them (Kubernetes node labels excluded:
    they follow Kubernetes' rules, not GCP's)."""
    out: dict[str, Any] = {}
    for key in ("labels", "resourceLabels"):
        out.update(mapping(props.get(key)))
    out.update(mapping(mapping(props.get("nodeConfig")).get("resourceLabels")))
    return out


def is_trainctl(props: Mapping[str, Any]) -> bool:
    return labels_of(props).get("managed-by") == "trainctl"


def number(value: Any) -> int | None:
    # The engine hands numbers over as floats (4.0).
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def is_false_string(value: Any) -> bool:
    return isinstance(value, str) and value.strip().upper() == "FALSE"
