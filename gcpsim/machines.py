"""What stands behind a simulated VM or TPU host: a machine backend.

The Compute and TPU API modules own the API's view (status, addresses they allocate from the
subnetwork, metadata, labels); the backend makes a machine of it. Two backends exist:
  - `ApiOnly`: no machine at all, but a guest agent's effects (host keys published as guest
    attributes), so `up` of a large stack can be measured through the API alone;
  - the real one (gcpsim/nodes.py): a network namespace per VM with its own sshd,
    on a bridge per VPC network, booted by a guest agent that reads the instance's metadata
    from a GCE metadata server (ssh-keys, startup-script) and publishes its host keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Network
from typing import Any, Protocol

from gcpsim.external_ranges import EXTERNAL_POOL


@dataclass(frozen=True)
class Machine:
    """A VM (or one TPU host) as its backend needs to know it."""
    key: str  # unique in the world: "<project>/<zone>/<name>" (TPU hosts: ".../<node>-w<i>")
    project: str
    zone: str
    name: str  # the hostname the guest sees
    network: str  # "<project>/<network name>": machines on one network reach each other
    subnet_cidr: str  # the subnetwork's ipCidrRange (its gateway is the first host address)
    internal_ip: str  # allocated by the API from the subnetwork
    external_ip: str | None  # an access config's NAT address, if the instance has one
    metadata: dict[str, str]  # instance metadata items (ssh-keys, startup-script, ...)
    project_metadata: dict[str, str] = field(default_factory=dict)
    service_account: str | None = None
    access_token: str | None = None  # the account's, which the metadata server hands the guest
    scopes: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    spot: bool = False
    # Declared accelerators (e.g. {"nvidia-l4": 1}, {"v5litepod-16": 4 chips}): simulated, the
    # machine says so on the node; training there runs on CPU.
    accelerators: dict[str, int] = field(default_factory=dict)
    machine_type: str = ""


@dataclass(frozen=True)
class FirewallRule:
    """An ingress allow rule of a VPC network, as Compute stores it (egress is open)."""
    name: str
    source_ranges: tuple[str, ...]
    source_tags: tuple[str, ...]
    target_tags: tuple[str, ...]  # empty: every instance of the network
    allowed: tuple[tuple[str, tuple[str, ...]], ...]  # (protocol, ports), e.g. ("tcp", ("22",))
    priority: int = 1000


class MachineBackend(Protocol):
    def boot(self, machine: Machine) -> None:
        """Create (or start again, keeping its disk) the machine; returns once it is booting."""

    def stop(self, key: str) -> None:
        """Power off: processes end, the disk stays (TERMINATED)."""

    def delete(self, key: str) -> None:
        """The machine and its disk are gone."""

    def announce_preemption(self, key: str) -> None:
        """`instance/preempted` turns TRUE and the guest's processes get SIGTERM; the API
        stops or deletes it once its guest has shut down, at the latest after the grace period."""

    def shut_down(self, key: str) -> bool:
        """After a preemption's notice: whether the guest has finished shutting down (every
        program of it ended but the sshd that keeps the machine up until it is stopped)."""

    def announce_maintenance(self, key: str, event: str) -> None:
        """`instance/maintenance-event` becomes `event` (NONE: the maintenance is over)."""

    def guest_attributes(self, key: str, query_path: str) -> list[dict[str, str]]:
        """Guest attribute items under `query_path` ("hostkeys/"): namespace, key, value."""

    def set_metadata(self, machine: Machine) -> None:
        """The instance's metadata changed (instances.setMetadata): the guest sees it."""

    def apply_firewall(self, network: str, rules: list[FirewallRule], caller_ip: str) -> None:
        """The network's ingress rules, enforced on its machines; `caller_ip` is the address
        the controller's traffic is seen from (the user's public address)."""

    def remove_network(self, network: str) -> None:
        """The VPC network is deleted: nothing of it may remain on this machine."""

    def external_range(self) -> IPv4Network:
        """Where the world's external addresses come from: no other world on this machine
        hands out one of them while this backend's machines may be routed to it."""


class ApiOnly:
    """No machines: what the API says is all there is. A stand-in guest agent publishes one
    host key per machine (derived from its key, so every process answers alike), and callers
    that pin host keys from guest attributes go on."""

    def boot(self, machine: Machine) -> None:
        pass

    def stop(self, key: str) -> None:
        pass

    def delete(self, key: str) -> None:
        pass

    def announce_preemption(self, key: str) -> None:
        pass

    def shut_down(self, key: str) -> bool:
        return False  # no guest to watch: the VM goes at the grace period's end

    def announce_maintenance(self, key: str, event: str) -> None:
        pass

    def guest_attributes(self, key: str, query_path: str) -> list[dict[str, str]]:
        if query_path.rstrip("/") != "hostkeys":
            return []
        kind, value = _derived_host_key(key).split()[:2]
        return [{"namespace": "hostkeys", "key": kind, "value": value}]

    def set_metadata(self, machine: Machine) -> None:
        pass

    def apply_firewall(self, network: str, rules: list[FirewallRule], caller_ip: str) -> None:
        pass

    def remove_network(self, network: str) -> None:
        pass

    def external_range(self) -> IPv4Network:
        return EXTERNAL_POOL  # nothing is routed: worlds without machines cannot collide


def _derived_host_key(key: str) -> str:
    import hashlib

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    seed = hashlib.sha256(f"trainctl-simulator-host-key:{key}".encode()).digest()
    return Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def metadata_items(metadata: dict[str, Any] | None) -> dict[str, str]:
    """Compute's Metadata {"items": [{"key", "value"}]} as a plain mapping."""
    return {i["key"]: i.get("value", "") for i in (metadata or {}).get("items", [])}
