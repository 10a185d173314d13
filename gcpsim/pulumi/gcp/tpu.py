"""google_tpu_v2_vm (services/tpuv2/resource_tpu_v2_vm.go, a generated resource).

Create: POST projects/{p}/locations/{zone}/nodes?nodeId={name} with the fields the program
sets, its operation waited on ("Creating Vm"; on failure nothing is kept), then GET. Updates
PATCH with an updateMask of description, dataDisks, metadata, tags and labels; every other
field is ForceNew. Delete: DELETE and its operation ("PREVENT" refuses, "ABANDON" only forgets).

The service account's scopes are sent as the program gives them and kept as the API returns
them: the provider neither expands nor canonicalizes them (expandTpuV2VmServiceAccountScope and
flattenTpuV2VmServiceAccountScope return the value unchanged). Its DiffSuppressFunc,
tpuServiceAccountAddedScopesSuppress, only drops https://www.googleapis.com/auth/pubsub
(a scope GCP adds) before comparing the lists in order. So whether a second `up` replaces the
node depends on what the TPU API answers for `cloud-platform`: if it answers the full URL,
the lists differ and the scope, being ForceNew, replaces the node on every `up`.
"""

from __future__ import annotations

from typing import Any

from gcpsim.pulumi.gcp.base import GcpResource, drop_empty, failing_as, last
from gcpsim.pulumi.plugins import Diff, ProviderError

PUBSUB = "https://www.googleapis.com/auth/pubsub"
MASK = {"description": "description", "dataDisks": "dataDisks", "metadata": "metadata", "tags": "tags",
        "labels": "labels"}


def same_scopes(new: Any, old: Any) -> bool:
    """tpuServiceAccountAddedScopesSuppress: equal once the pubsub scope is dropped."""
    return [s for s in new or [] if s != PUBSUB] == [s for s in old or [] if s != PUBSUB]


class V2Vm(GcpResource):
    token = "gcp:tpu/v2Vm:V2Vm"
    endpoint = "tpuV2CustomEndpoint"
    default_url = "https://tpu.googleapis.com/v2alpha1/"
    force_new = frozenset({"name", "runtimeVersion", "acceleratorConfig", "acceleratorType", "cidrBlock",
                           "networkConfig", "networkConfigs", "schedulingConfig", "serviceAccount",
                           "shieldedInstanceConfig", "zone", "project"})

    def suppress(self, path: str, new: Any, old: Any) -> bool:
        return path == "serviceAccount.scopes" and same_scopes(new, old)

    def _body(self, inputs: dict[str, Any]) -> dict[str, Any]:
        network = inputs.get("networkConfig") or {}
        sa = inputs.get("serviceAccount") or {}
        scheduling = inputs.get("schedulingConfig") or {}
        return drop_empty({
            "runtimeVersion": inputs.get("runtimeVersion"), "acceleratorType": inputs.get("acceleratorType"),
            "description": inputs.get("description"), "cidrBlock": inputs.get("cidrBlock"),
            "networkConfig": drop_empty({"network": network.get("network"), "subnetwork": network.get("subnetwork"),
                                         "enableExternalIps": network.get("enableExternalIps"),
                                         "canIpForward": network.get("canIpForward"),
                                         "queueCount": network.get("queueCount")}),
            "serviceAccount": drop_empty({"email": sa.get("email"), "scope": sa.get("scopes")}),
            "schedulingConfig": drop_empty({"preemptible": scheduling.get("preemptible"),
                                            "reserved": scheduling.get("reserved"), "spot": scheduling.get("spot")}),
            "acceleratorConfig": inputs.get("acceleratorConfig"), "metadata": inputs.get("metadata"),
            "tags": inputs.get("tags"), "labels": self.labels_on_create(inputs.get("labels"))})

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        parent = f"projects/{self.project(inputs)}/locations/{self.zone(inputs)}"
        with failing_as("Error creating Vm"):
            op = self.rest.call("POST", self.url(f"{parent}/nodes"), self._body(inputs), {"nodeId": inputs["name"]})
        with failing_as("Error waiting to create Vm"):
            self.wait_lro(op, "Creating Vm")
        id_ = f"{parent}/nodes/{inputs['name']}"
        return id_, self.read(id_, inputs, inputs) or inputs

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        found = self.fetch(self.url(id_), f"TpuV2Vm {id_!r}")
        if found is None:
            return None
        sa = found.get("serviceAccount")
        network = found.get("networkConfig") or {}
        scheduling = found.get("schedulingConfig")
        return {**state, **inputs, "id": id_, "name": last(found.get("name", id_)), "project": id_.split("/")[1],
                "zone": id_.split("/")[3], "runtimeVersion": found.get("runtimeVersion"),
                "acceleratorType": found.get("acceleratorType"), "cidrBlock": found.get("cidrBlock"),
                "state": found.get("state"), "health": found.get("health"),
                "networkConfig": {"network": network.get("network"), "subnetwork": network.get("subnetwork"),
                                  "enableExternalIps": network.get("enableExternalIps"),
                                  "canIpForward": network.get("canIpForward"), "queueCount": network.get("queueCount")},
                "serviceAccount": {"email": sa.get("email"), "scopes": sa.get("scope")} if sa else None,
                "schedulingConfig": scheduling,
                "networkEndpoints": [{"ipAddress": e.get("ipAddress"), "port": int(e.get("port", 0) or 0),
                                      "accessConfigs": [{"externalIp": e["accessConfig"].get("externalIp")}]
                                      if e.get("accessConfig") else []}
                                     for e in found.get("networkEndpoints") or []],
                "metadata": found.get("metadata"), "tags": found.get("tags"),
                "deletionPolicy": (state or inputs).get("deletionPolicy", "DELETE"),
                **self.labels_outputs(inputs.get("labels") or state.get("labels"), found.get("labels"))}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        changed = {p.split(".")[0] for p in diff.changed}
        mask = [MASK[c] for c in sorted(changed) if c in MASK]
        if mask:
            body = drop_empty({"description": news.get("description"), "metadata": news.get("metadata"),
                               "tags": news.get("tags"), "dataDisks": news.get("dataDisks")})
            if "labels" in changed:
                body["labels"] = self.labels_on_update(news.get("labels"), state.get("effectiveLabels") or {})
            with failing_as(f"Error updating Vm {id_!r}"):
                op = self.rest.call("PATCH", self.url(id_), body, {"updateMask": ",".join(mask)})
                self.wait_lro(op, "Updating Vm")
        return self.read(id_, news, state) or state

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        policy = state.get("deletionPolicy", "DELETE")
        if policy == "PREVENT":
            raise ProviderError('cannot destroy TpuV2Vm without setting deletion_policy="DELETE" and running '
                                "`terraform apply`")
        if policy == "ABANDON":
            return
        op = self.delete_request(self.url(id_), "Vm")
        if op is not None:
            with failing_as("Error waiting to delete Vm"):
                self.wait_lro(op, "Deleting Vm")


TYPES = (V2Vm,)
