"""GKE: google_container_cluster and google_container_node_pool (services/container/
resource_container_cluster.go, resource_container_node_pool.go, node_config.go).

The provider's client is google.golang.org/api/container/v1beta1 with the custom endpoint's
version removed (container/client.go), so every call goes to /v1beta1/ whatever the endpoint
names. Operations are polled by location (ContainerOperationWaiter; a failed one reports its
statusMessage). A cluster is created (the persistent-disk CSI driver on, as the provider
forces it), its default node pool deleted when remove_default_node_pool is set, then read once
it rests in RUNNING; a create whose operation fails keeps the cluster in the state when it
exists. Deletion is refused while deletion_protection is true (a provider-side flag).
Updates modelled: the cluster's resource labels (setResourceLabels), release channel and
Workload Identity pool (update); a node pool's size (setSize), management (setManagement) and
node labels, resource labels and tags (update). Node-config scopes are canonicalized as for
instances (the oauth_scopes StateFunc).
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

from gcpsim.pulumi.gcp.base import GcpResource, drop_empty, failing_as, last, relative, same_resource
from gcpsim.pulumi.gcp.instance_fields import canonical_scope, same_scopes
from gcpsim.pulumi.gcp.rest import DEFAULT_TIMEOUT_SECONDS, GoogleApiError, poll
from gcpsim.pulumi.plugins import Diff, ProviderError

T = TypeVar("T")

# node_config.go defaultOauthScopes (gcloud's gke-default)
DEFAULT_SCOPES = [f"https://www.googleapis.com/auth/{scope}" for scope in (
    "devstorage.read_only", "logging.write", "monitoring", "service.management.readonly", "servicecontrol",
    "trace.append")]


class GkeResource(GcpResource):
    endpoint = "containerCustomEndpoint"
    default_url = "https://container.googleapis.com/v1beta1/"
    go_client_version = "v1beta1"

    def wait_container(self, op: dict[str, Any], project: str, location: str, activity: str) -> None:
        name = f"projects/{project}/locations/{location}/operations/{op['name']}"
        if op.get("status") != "DONE":
            op = poll(lambda: self.rest.get(self.url(name)), lambda o: o.get("status") == "DONE", activity)
        if op.get("statusMessage") or op.get("error"):
            message = op.get("statusMessage") or (op.get("error") or {}).get("message", "")
            raise ProviderError(f"Error waiting for {activity}: {message}")

    def wait_resting(self, id_: str, kind: str) -> dict[str, Any]:
        found = poll(lambda: self.rest.get(self.url(id_)),
                     lambda c: c.get("status") in ("RUNNING", "ERROR", "DEGRADED", "RUNNING_WITH_ERROR"),
                     f"{kind} to reach a resting state")
        if found.get("status") == "ERROR":
            raise ProviderError(f"{kind} {last(id_)} was created in the error state \"ERROR\"")
        return found

    def suppress(self, path: str, new: Any, old: Any) -> bool:
        if path.endswith("oauthScopes"):
            return same_scopes(new, old)
        if path in ("network", "subnetwork"):
            return same_resource(new, old)
        return False


def node_config(config: dict[str, Any] | None) -> dict[str, Any]:
    """expandNodeConfig for the fields trainctl's program sets."""
    config = config or {}
    return drop_empty({
        "machineType": config.get("machineType"), "diskSizeGb": config.get("diskSizeGb"),
        "gvnic": config.get("gvnic"),
        "oauthScopes": [canonical_scope(s) for s in config["oauthScopes"]] if config.get("oauthScopes")
        else DEFAULT_SCOPES,
        "serviceAccount": config.get("serviceAccount"), "labels": config.get("labels"),
        "resourceLabels": config.get("resourceLabels"), "tags": config.get("tags"), "spot": config.get("spot"),
        "workloadMetadataConfig": config.get("workloadMetadataConfig"),
        "reservationAffinity": config.get("reservationAffinity"),  # the API's fields and names
        "flexStart": config.get("flexStart"), "maxRunDuration": config.get("maxRunDuration"),
        "accelerators": [drop_empty({"acceleratorCount": a.get("count"), "acceleratorType": a.get("type"),
                                     "gpuDriverInstallationConfig": a.get("gpuDriverInstallationConfig")})
                         for a in config.get("guestAccelerators") or [] if a.get("count")]})


def flat_node_config(config: dict[str, Any] | None) -> dict[str, Any]:
    config = config or {}
    return {**{k: v for k, v in config.items() if k != "accelerators"},
            "guestAccelerators": [drop_empty({"count": a.get("acceleratorCount"), "type": a.get("acceleratorType"),
                                              "gpuDriverInstallationConfig": a.get("gpuDriverInstallationConfig")})
                                  for a in config.get("accelerators") or []]}


def cluster_network_config(inputs: dict[str, Any]) -> dict[str, Any]:
    """expandClusterNetworkConfig for the multi-networking a GPUDirect pool needs."""
    return drop_empty({"enableMultiNetworking": inputs.get("enableMultiNetworking"),
                       "datapathProvider": inputs.get("datapathProvider")})


def pool_network_config(config: dict[str, Any] | None) -> dict[str, Any]:
    """expandNodeNetworkConfig: each additional node network as the program names it."""
    return drop_empty({"additionalNodeNetworkConfigs": [
        {"network": n.get("network"), "subnetwork": n.get("subnetwork")}
        for n in (config or {}).get("additionalNodeNetworkConfigs") or []]})


def pool_autoscaling(autoscaling: dict[str, Any] | None) -> dict[str, Any] | None:
    """expandNodePool's autoscaling (resource_container_node_pool.go): a block that is set is sent
    enabled, its counts always sent (ForceSendFields), 0 where unset."""
    if not autoscaling:
        return None
    return {"enabled": True, **{k: autoscaling.get(k) or 0 for k in (
        "minNodeCount", "maxNodeCount", "totalMinNodeCount", "totalMaxNodeCount")},
        **drop_empty({"locationPolicy": autoscaling.get("locationPolicy")})}


def flat_autoscaling(autoscaling: dict[str, Any] | None) -> dict[str, Any] | None:
    """flattenNodePool's autoscaling: the block only where the API has it enabled."""
    if not (autoscaling or {}).get("enabled"):
        return None
    return {k: v for k, v in (autoscaling or {}).items() if k != "enabled"}


def flat_network_config(found: dict[str, Any] | None, given: dict[str, Any] | None) -> dict[str, Any]:
    """flattenAdditionalNodeNetworkConfig: the API's network and subnetwork for each one."""
    extra = (found or {}).get("additionalNodeNetworkConfigs")
    if not extra:
        return {}
    return {"networkConfig": {**(given or {}), "additionalNodeNetworkConfigs": [
        {"network": n.get("network"), "subnetwork": n.get("subnetwork")} for n in extra]}}


class Cluster(GkeResource):
    token = "gcp:container/cluster:Cluster"
    force_new = frozenset({"name", "location", "project", "network", "subnetwork", "initialNodeCount",
                           "nodeConfig", "ipAllocationPolicy", "privateClusterConfig", "nodeLocations"})

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        project, location = self.project(inputs), self.zone({"zone": inputs.get("location")})
        parent = f"projects/{project}/locations/{location}"
        cluster = drop_empty({
            "name": inputs["name"], "initialNodeCount": inputs.get("initialNodeCount"),
            "network": relative(inputs.get("network") or ""), "subnetwork": relative(inputs.get("subnetwork") or ""),
            "resourceLabels": self.labels_on_create(inputs.get("resourceLabels")),
            "workloadIdentityConfig": inputs.get("workloadIdentityConfig"),
            "releaseChannel": inputs.get("releaseChannel"), "nodeConfig": node_config(inputs.get("nodeConfig")),
            "networkConfig": cluster_network_config(inputs),
            # expandClusterAddonsConfig: the add-ons the program names, over the PD CSI driver's default
            "addonsConfig": {"gcePersistentDiskCsiDriverConfig": {"enabled": True}, **(inputs.get("addonsConfig") or {})}})
        op = self.rest.call("POST", self.url(f"{parent}/clusters"), {"cluster": cluster})
        id_ = f"{parent}/clusters/{inputs['name']}"
        try:
            self.wait_container(op, project, location, "creating GKE cluster")
        except ProviderError as exc:
            kept = self.read(id_, inputs, inputs)
            raise ProviderError(str(exc), (id_, kept) if kept else None) from None
        if inputs.get("removeDefaultNodePool"):
            with failing_as("Error while waiting to delete default node pool"):
                op = self.rest.call("DELETE", self.url(f"{id_}/nodePools/default-pool"))
                self.wait_container(op, project, location, "removing default node pool")
        self.wait_resting(id_, "Cluster")
        return id_, self.read(id_, inputs, inputs) or inputs

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        found = self.fetch(self.url(id_), f"Container Cluster {last(id_)!r}")
        if found is None:
            return None
        auth = found.get("masterAuth") or {}
        network = found.get("networkConfig") or {}
        return {**state, **inputs, "id": id_, "name": found["name"], "project": id_.split("/")[1],
                "location": found.get("location"), "endpoint": found.get("endpoint"), "selfLink": found.get("selfLink"),
                "masterAuth": {"clusterCaCertificate": auth.get("clusterCaCertificate"),
                               "clientCertificate": auth.get("clientCertificate"), "clientKey": auth.get("clientKey"),
                               "clientCertificateConfig": {
                                   "issueClientCertificate": bool(auth.get("clientCertificate"))}},
                "network": network.get("network", found.get("network")),
                "subnetwork": network.get("subnetwork", found.get("subnetwork")),
                "releaseChannel": found.get("releaseChannel"),
                "workloadIdentityConfig": found.get("workloadIdentityConfig"),
                "masterVersion": found.get("currentMasterVersion"), "servicesIpv4Cidr": found.get("servicesIpv4Cidr"),
                "labelFingerprint": found.get("labelFingerprint"),
                **{k if k != "labels" else "resourceLabels": v for k, v in self.labels_outputs(
                    inputs.get("resourceLabels") or state.get("resourceLabels"), found.get("resourceLabels")).items()}}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        project, location = id_.split("/")[1], id_.split("/")[3]
        changed = {p.split(".")[0] for p in diff.changed}
        if "resourceLabels" in changed:
            current = self.rest.get(self.url(id_))
            labels = self.labels_on_update(news.get("resourceLabels"), current.get("resourceLabels") or {})
            with failing_as("Error updating GKE resource labels"):
                op = self.rest.call("POST", self.url(f"{id_}:setResourceLabels"),
                                    {"resourceLabels": labels, "labelFingerprint": current.get("labelFingerprint")})
                self.wait_container(op, project, location, "updating GKE resource labels")
        for field, desired in (("releaseChannel", "desiredReleaseChannel"),
                               ("workloadIdentityConfig", "desiredWorkloadIdentityConfig"),
                               ("addonsConfig", "desiredAddonsConfig")):
            if field in changed:
                with failing_as(f"Error updating GKE cluster {field}"):
                    op = self.rest.call("PUT", self.url(id_), {"update": {desired: news.get(field)}})
                    self.wait_container(op, project, location, f"updating GKE cluster {field}")
        return self.read(id_, news, state) or state

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        if state.get("deletionProtection", True):
            raise ProviderError("Cannot destroy cluster because deletion_protection is set to true. "
                                "Set it to false to proceed with cluster deletion.")
        op = self.delete_request(self.url(id_), "Cluster")
        if op is not None:
            self.wait_container(op, id_.split("/")[1], id_.split("/")[3], "deleting GKE cluster")


class NodePool(GkeResource):
    token = "gcp:container/nodePool:NodePool"
    # resource_container_node_pool.go / node_config.go ForceNew fields; among them
    # network_config.additional_node_network_configs and its network and subnetwork (names)
    force_new = frozenset({"name", "namePrefix", "cluster", "location", "project", "initialNodeCount",
                           "maxPodsPerNode", "placementPolicy", "networkConfig",
                           "networkConfig.additionalNodeNetworkConfigs.network",
                           "networkConfig.additionalNodeNetworkConfigs.subnetwork", "nodeConfig.machineType",
                           "nodeConfig.guestAccelerators", "nodeConfig.oauthScopes", "nodeConfig.serviceAccount",
                           "nodeConfig.spot", "nodeConfig.diskSizeGb", "nodeConfig.reservationAffinity", "nodeConfig.workloadMetadataConfig"})

    def _cluster(self, inputs: dict[str, Any]) -> str:
        cluster = relative(str(inputs["cluster"]))
        if "/" in cluster:
            return cluster
        location = self.zone({"zone": inputs.get("location")})
        return f"projects/{self.project(inputs)}/locations/{location}/clusters/{cluster}"

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        cluster = self._cluster(inputs)
        project, location = cluster.split("/")[1], cluster.split("/")[3]
        id_ = f"{cluster}/nodePools/{inputs['name']}"
        if self.read_or_none(self.url(id_)) is not None:
            raise ProviderError(f"resource - {id_} - already exists")
        count = inputs.get("nodeCount", inputs.get("initialNodeCount"))
        pool = drop_empty({"name": inputs["name"], "initialNodeCount": count,
                           "config": node_config(inputs.get("nodeConfig")), "management": inputs.get("management"),
                           "placementPolicy": inputs.get("placementPolicy"),
                           "autoscaling": pool_autoscaling(inputs.get("autoscaling")),
                           "networkConfig": pool_network_config(inputs.get("networkConfig")),
                           "nodeLocations": inputs.get("nodeLocations"), "version": inputs.get("version")})
        with failing_as("error creating NodePool"):
            op = while_cluster_busy(lambda: self.rest.call("POST", self.url(f"{cluster}/nodePools"), {"nodePool": pool}))
        try:
            self.wait_container(op, project, location, "creating GKE NodePool")
        except ProviderError as exc:
            kept = self.read(id_, inputs, inputs)
            raise ProviderError(str(exc), (id_, kept) if kept else None) from None
        self.wait_resting(id_, "NodePool")
        return id_, self.read(id_, inputs, inputs) or inputs

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        found = self.fetch(self.url(id_), f"NodePool {last(id_)!r} from cluster {id_.split('/')[5]!r}")
        if found is None:
            return None
        return {**state, **inputs, "id": id_, "name": found["name"], "project": id_.split("/")[1],
                "location": id_.split("/")[3], "cluster": id_.split("/")[5],
                "nodeCount": found.get("currentNodeCount", found.get("initialNodeCount")),
                "initialNodeCount": found.get("initialNodeCount"), "nodeConfig": flat_node_config(found.get("config")),
                "management": found.get("management"), "placementPolicy": found.get("placementPolicy"),
                # flattenNodeNetworkConfig: the additional node networks as the API holds them, so
                # a program that names them otherwise sees a diff (they are ForceNew)
                **flat_network_config(found.get("networkConfig"), inputs.get("networkConfig")),
                "autoscaling": flat_autoscaling(found.get("autoscaling")), "version": found.get("version"), "instanceGroupUrls": found.get("instanceGroupUrls") or [],
                "managedInstanceGroupUrls": found.get("managedInstanceGroupUrls") or found.get("instanceGroupUrls")
                or []}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        project, location = id_.split("/")[1], id_.split("/")[3]
        changed = set(diff.changed)

        def call(verb: str, suffix: str, body: dict[str, Any], activity: str) -> None:
            with failing_as(f"Error updating GKE node pool {activity}"):
                op = self.rest.call(verb, self.url(id_ + suffix), body)
                self.wait_container(op, project, location, f"updating GKE node pool {activity}")

        if "nodeCount" in changed:
            call("POST", ":setSize", {"nodeCount": news.get("nodeCount")}, "size")
        if any(p.startswith("management") for p in changed):
            call("POST", ":setManagement", {"management": news.get("management")}, "management")
        config = news.get("nodeConfig") or {}
        for field, key in (("labels", "labels"), ("resourceLabels", "resourceLabels"), ("tags", "tags")):
            if f"nodeConfig.{field}" in changed:
                value = {"labels": config.get(field) or {}} if field != "tags" else {"tags": config.get(field) or []}
                call("PUT", "", {key: value}, field)
        return self.read(id_, news, state) or state

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        op = while_cluster_busy(lambda: self.delete_request(self.url(id_), "NodePool"))
        if op is not None:
            self.wait_container(op, id_.split("/")[1], id_.split("/")[3], "deleting GKE NodePool")


def while_cluster_busy(call: Callable[[], T]) -> T:
    """The provider's retry of a node pool create or delete that GKE refuses with a failed
    precondition (another operation of the cluster runs: several pools of one stack are created
    at once), until its timeout (resource.Retry with tpgresource.IsFailedPreconditionError)."""
    deadline = time.monotonic() + DEFAULT_TIMEOUT_SECONDS
    wait = 0.1
    while True:
        try:
            return call()
        except ProviderError as exc:
            # delete_request words the API's error as its own (the API's stays its __context__)
            busy = _failed_precondition(exc) or _failed_precondition(exc.__context__)
            if not busy or time.monotonic() > deadline:
                raise
        time.sleep(wait)
        wait = min(wait * 2, 2.0)


def _failed_precondition(exc: BaseException | None) -> bool:
    return isinstance(exc, GoogleApiError) and exc.code == 400 and "failedPrecondition" in {
        e.get("reason") for e in exc.errors}


TYPES = (Cluster, NodePool)
