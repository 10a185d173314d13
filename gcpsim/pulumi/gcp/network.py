"""Compute networking: google_compute_network, _subnetwork, _firewall, _router and
_router_nat (services/compute/resource_compute_*.go of terraform-provider-google-beta).

Each is created with a POST to its collection, waited on as a compute operation, read with
GET and deleted with DELETE (a 404 on delete counts as gone). Updates, where the schema allows
them: a network PATCHes its routing mode; a subnetwork widens its range with
expandIpCidrRange and switches private Google access with setPrivateIpGoogleAccess; a
firewall and a router PATCH their updatable fields. A router NAT is part of its router: it is
created, changed and deleted by PATCHing the router's `nats` list (after a GET of the router).
"""

from __future__ import annotations

from typing import Any, ClassVar

from gcpsim.pulumi.gcp.base import GcpResource, drop_empty, failing_as, last, relative
from gcpsim.pulumi.plugins import Diff, ProviderError


class ComputeObject(GcpResource):
    endpoint = "computeCustomEndpoint"
    default_url = "https://compute.googleapis.com/compute/beta/"
    autoname_lower = True
    kind: ClassVar[str] = ""  # the resource's name in the provider's messages
    collection_path: ClassVar[str] = ""  # e.g. "projects/{project}/global/networks"

    def collection(self, inputs: dict[str, Any]) -> str:
        return self.collection_path.format(project=self.project(inputs), region=self.region(inputs)
                                           if "{region}" in self.collection_path else "")

    def body(self, inputs: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def flatten(self, obj: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
        return {}

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        project, collection = self.project(inputs), self.collection(inputs)
        with failing_as(f"Error creating {self.kind}"):
            op = self.rest.call("POST", self.url(collection), self.body(inputs))
        id_ = f"{collection}/{inputs['name']}"
        with failing_as(f"Error waiting to create {self.kind}"):
            self.wait_compute(op, project, f"Creating {self.kind}")
        found = self.read(id_, inputs, inputs)
        if found is None:
            raise ProviderError(f"Error reading {self.kind} {id_!r} just created: it is gone")
        return id_, found

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        obj = self.fetch(self.url(id_), f"Compute{self.kind} {id_!r}")
        if obj is None:
            return None
        return {**inputs, "id": id_, "name": obj.get("name"), "project": id_.split("/")[1],
                "selfLink": obj.get("selfLink"), "creationTimestamp": obj.get("creationTimestamp"),
                **self.flatten(obj, inputs)}

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        op = self.delete_request(self.url(id_), self.kind)
        if op is not None:
            with failing_as(f"Error waiting to delete {self.kind}"):
                self.wait_compute(op, id_.split("/")[1], f"Deleting {self.kind}")

    def patch(self, id_: str, body: dict[str, Any], method: str = "PATCH", suffix: str = "") -> None:
        with failing_as(f"Error updating {self.kind} {id_!r}"):
            op = self.rest.call(method, self.url(id_ + suffix), body)
            self.wait_compute(op, id_.split("/")[1], f"Updating {self.kind}")


class Network(ComputeObject):
    token = "gcp:compute/network:Network"
    kind = "Network"
    collection_path = "projects/{project}/global/networks"
    force_new = frozenset({"name", "autoCreateSubnetworks", "description", "project", "internalIpv6Range",
                           "networkProfile", "params"})

    def body(self, inputs: dict[str, Any]) -> dict[str, Any]:
        body = drop_empty({"name": inputs["name"], "description": inputs.get("description"),
                           "mtu": inputs.get("mtu"), "networkProfile": inputs.get("networkProfile")})
        body["autoCreateSubnetworks"] = bool(inputs.get("autoCreateSubnetworks", True))
        if inputs.get("routingMode"):
            body["routingConfig"] = {"routingMode": inputs["routingMode"]}
        return body

    def flatten(self, obj: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
        return {"autoCreateSubnetworks": obj.get("autoCreateSubnetworks"), "mtu": obj.get("mtu"),
                "routingMode": (obj.get("routingConfig") or {}).get("routingMode"),
                "gatewayIpv4": obj.get("gatewayIPv4"), "networkId": obj.get("id"), "numericId": obj.get("id"),
                "deleteDefaultRoutesOnCreate": bool(inputs.get("deleteDefaultRoutesOnCreate", False))}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        if any(p.startswith(("routingMode", "mtu")) for p in diff.changed):
            self.patch(id_, drop_empty({"routingConfig": {"routingMode": news.get("routingMode")}
                                        if news.get("routingMode") else None, "mtu": news.get("mtu")}))
        return self.read(id_, news, state) or state


class Subnetwork(ComputeObject):
    token = "gcp:compute/subnetwork:Subnetwork"
    kind = "Subnetwork"
    collection_path = "projects/{project}/regions/{region}/subnetworks"
    self_links = frozenset({"network"})
    force_new = frozenset({"name", "network", "description", "region", "project", "purpose", "params",
                           "reservedInternalRange", "ipCollection", "ipv6AccessType"})

    def body(self, inputs: dict[str, Any]) -> dict[str, Any]:
        project = self.project(inputs)
        return drop_empty({
            "name": inputs["name"], "description": inputs.get("description"),
            "network": _network_link(inputs["network"], project), "ipCidrRange": inputs.get("ipCidrRange"),
            "privateIpGoogleAccess": inputs.get("privateIpGoogleAccess"),
            "region": f"projects/{project}/global/regions/{self.region(inputs)}",
            "secondaryIpRanges": [{"rangeName": r.get("rangeName"), "ipCidrRange": r.get("ipCidrRange")}
                                  for r in inputs.get("secondaryIpRanges") or []]})

    def flatten(self, obj: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
        return {"network": obj.get("network"), "ipCidrRange": obj.get("ipCidrRange"),
                "privateIpGoogleAccess": obj.get("privateIpGoogleAccess"), "region": last(obj.get("region", "")),
                "gatewayAddress": obj.get("gatewayAddress"), "fingerprint": obj.get("fingerprint"),
                "subnetworkId": obj.get("id"), "stackType": obj.get("stackType"), "purpose": obj.get("purpose")}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        if "ipCidrRange" in diff.changed:
            self.patch(id_, {"ipCidrRange": news["ipCidrRange"]}, "POST", "/expandIpCidrRange")
        if "privateIpGoogleAccess" in diff.changed:
            self.patch(id_, {"privateIpGoogleAccess": bool(news.get("privateIpGoogleAccess"))}, "POST",
                       "/setPrivateIpGoogleAccess")
        return self.read(id_, news, state) or state


class Firewall(ComputeObject):
    token = "gcp:compute/firewall:Firewall"
    kind = "Firewall"
    collection_path = "projects/{project}/global/firewalls"
    self_links = frozenset({"network"})
    force_new = frozenset({"name", "direction", "project", "params"})

    def body(self, inputs: dict[str, Any]) -> dict[str, Any]:
        def rules(key: str) -> list[dict[str, Any]]:
            return [drop_empty({"IPProtocol": r.get("protocol"), "ports": r.get("ports")})
                    for r in inputs.get(key) or []]
        return drop_empty({
            "name": inputs["name"], "description": inputs.get("description"),
            "network": _network_link(inputs["network"], self.project(inputs)),
            "direction": inputs.get("direction"), "priority": inputs.get("priority"),
            "allowed": rules("allows"), "denied": rules("denies"),
            "sourceRanges": inputs.get("sourceRanges"), "sourceTags": inputs.get("sourceTags"),
            "targetTags": inputs.get("targetTags"), "destinationRanges": inputs.get("destinationRanges"),
            "sourceServiceAccounts": inputs.get("sourceServiceAccounts"),
            "targetServiceAccounts": inputs.get("targetServiceAccounts"), "disabled": inputs.get("disabled")})

    def flatten(self, obj: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
        def rules(key: str) -> list[dict[str, Any]]:
            return [drop_empty({"protocol": r.get("IPProtocol"), "ports": r.get("ports")}) for r in obj.get(key) or []]
        return {"network": obj.get("network"), "direction": obj.get("direction"), "priority": obj.get("priority"),
                "allows": rules("allowed"), "denies": rules("denied"), "sourceRanges": obj.get("sourceRanges"),
                "sourceTags": obj.get("sourceTags"), "targetTags": obj.get("targetTags"),
                "destinationRanges": obj.get("destinationRanges"), "disabled": obj.get("disabled", False)}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        body = self.body(news)
        body.pop("direction", None)
        self.patch(id_, body)
        return self.read(id_, news, state) or state


class Router(ComputeObject):
    token = "gcp:compute/router:Router"
    kind = "Router"
    collection_path = "projects/{project}/regions/{region}/routers"
    self_links = frozenset({"network"})
    force_new = frozenset({"name", "network", "region", "project", "encryptedInterconnectRouter", "params"})

    def body(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return drop_empty({"name": inputs["name"], "description": inputs.get("description"),
                           "network": _network_link(inputs["network"], self.project(inputs)),
                           "bgp": inputs.get("bgp")})

    def flatten(self, obj: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
        return {"network": obj.get("network"), "region": last(obj.get("region", "")), "bgp": obj.get("bgp")}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        self.patch(id_, drop_empty({"description": news.get("description"), "bgp": news.get("bgp")}))
        return self.read(id_, news, state) or state


class RouterNat(ComputeObject):
    """A NAT is an entry of its router's `nats`: every change is a PATCH of the router."""

    token = "gcp:compute/routerNat:RouterNat"
    kind = "RouterNat"
    force_new = frozenset({"name", "router", "region", "project", "type", "endpointTypes", "initialNatIps"})
    FIELDS = ("natIpAllocateOption", "sourceSubnetworkIpRangesToNat", "natIps", "drainNatIps",
              "minPortsPerVm", "maxPortsPerVm", "udpIdleTimeoutSec", "icmpIdleTimeoutSec",
              "tcpEstablishedIdleTimeoutSec", "tcpTransitoryIdleTimeoutSec", "enableEndpointIndependentMapping",
              "enableDynamicPortAllocation", "logConfig", "autoNetworkTier")

    def _router(self, inputs: dict[str, Any]) -> str:
        return f"projects/{self.project(inputs)}/regions/{self.region(inputs)}/routers/{last(inputs['router'])}"

    def _nat(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return drop_empty({"name": inputs["name"], **{k: inputs.get(k) for k in self.FIELDS}})

    def _write(self, inputs: dict[str, Any], change: Any, activity: str) -> None:
        router = self._router(inputs)
        with failing_as(f"Error {activity} RouterNat"):
            current = self.rest.get(self.url(router))
            nats = change([n for n in current.get("nats") or []])
            op = self.rest.call("PATCH", self.url(router), {"nats": nats})
            self.wait_compute(op, self.project(inputs), f"{activity} RouterNat")

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self._write(inputs, lambda nats: nats + [self._nat(inputs)], "Creating")
        id_ = f"{self.project(inputs)}/{self.region(inputs)}/{last(inputs['router'])}/{inputs['name']}"
        return id_, self.read(id_, inputs, inputs) or {**inputs, "id": id_}

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        project, region, router, name = id_.split("/")
        obj = self.fetch(self.url(f"projects/{project}/regions/{region}/routers/{router}"), f"ComputeRouterNat {id_!r}")
        nat = next((n for n in (obj or {}).get("nats") or [] if n.get("name") == name), None)
        if nat is None:
            return None
        return {**inputs, "id": id_, "project": project, "region": region, "router": router, "name": name,
                **{k: nat[k] for k in self.FIELDS if k in nat}}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        nat = self._nat(news)
        self._write(news, lambda nats: [nat if n.get("name") == nat["name"] else n for n in nats], "Updating")
        return self.read(id_, news, state) or state

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        project, region, router, name = id_.split("/")
        inputs = {"project": project, "region": region, "router": router, "name": name}
        if self.read(id_, inputs, inputs) is not None:
            self._write(inputs, lambda nats: [n for n in nats if n.get("name") != name], "Deleting")


def _network_link(network: str, project: str) -> str:
    """ParseGlobalFieldValue("networks", ...).RelativeLink()."""
    path = relative(network)
    return path if "/" in path else f"projects/{project}/global/networks/{path}"


TYPES = (Network, Subnetwork, Firewall, Router, RouterNat)
