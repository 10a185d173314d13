"""Compute resource policies: google_compute_resource_policy (services/compute/
resource_compute_resource_policy.go of terraform-provider-google-beta), the group placement
kind trainctl declares (a COMPACT policy for a stack's VMs). Created with a POST to the region's
collection and waited on, read with GET, deleted with DELETE; the provider marks every field
ForceNew, so a change replaces the policy."""

from __future__ import annotations

from typing import Any

from gcpsim.pulumi.gcp.base import drop_empty
from gcpsim.pulumi.gcp.network import ComputeObject

_PLACEMENT_FIELDS = ("collocation", "vmCount", "availabilityDomainCount", "maxDistance", "gpuTopology",
                     "tpuTopology")


class ResourcePolicy(ComputeObject):
    token = "gcp:compute/resourcePolicy:ResourcePolicy"
    kind = "ResourcePolicy"
    collection_path = "projects/{project}/regions/{region}/resourcePolicies"
    force_new = frozenset({"name", "project", "region", "description", "groupPlacementPolicy",
                           "snapshotSchedulePolicy", "instanceSchedulePolicy", "diskConsistencyGroupPolicy",
                           "workloadPolicy"})

    def body(self, inputs: dict[str, Any]) -> dict[str, Any]:
        placement = inputs.get("groupPlacementPolicy") or {}
        return drop_empty({"name": inputs["name"], "description": inputs.get("description"),
                           "groupPlacementPolicy": drop_empty({k: placement.get(k) for k in _PLACEMENT_FIELDS})
                           if placement else None})

    def flatten(self, obj: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
        return {"region": self.region(inputs), "groupPlacementPolicy": obj.get("groupPlacementPolicy")}


TYPES = (ResourcePolicy,)
