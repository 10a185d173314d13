"""Each simulated GKE cluster's control plane: a Kubernetes API server at the cluster's endpoint
for as long as the cluster exists, with process pods behind it.

A cluster's endpoint is a loopback address of its own (127.88-95.n.1, port 443 where this
process may bind it, else a free port written into the endpoint as `address:port`), never an
address anything off this machine would answer. Its serving certificate is signed by the
cluster's own CA (the one masterAuth.clusterCaCertificate publishes), for that address, so the
kubeconfig trainctl's program writes from the cluster's endpoint and CA works unchanged. Its
pods get the addresses 127.a.n.2-254.

The API servers live in the process that serves the simulator (the daemon); the GKE API module
starts one when a cluster is created, hands it the node pools' nodes, and stops it when the
cluster is deleted; a simulator that starts over a world with clusters in it starts theirs
again (their pods and Kubernetes objects do not survive that: they lived in the process).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import socket
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from gcpsim import external_ranges, routes
from gcpsim.kubernetes import auth, scheduling
from gcpsim.kubernetes.api import KubernetesApi
from gcpsim.kubernetes.jobs import JobController
from gcpsim.kubernetes.processes import ProcessPods
from gcpsim.state import World

if TYPE_CHECKING:
    from gcpsim.server import Simulator

ENDPOINTS = "gke-endpoints"  # world names: endpoint address -> cluster id
LIVE = ("PROVISIONING", "RUNNING", "RECONCILING", "ERROR", "DEGRADED")


@dataclass
class ControlPlane:
    cluster_id: str
    api: KubernetesApi


_PLANES: dict[str, dict[str, ControlPlane]] = {}  # simulator home -> cluster id -> plane
_CLOSING: list[threading.Thread] = []
_LOCK = threading.Lock()


def ca_certificate(common_name: str) -> tuple[str, str]:
    """A self-signed CA as GKE gives a cluster: (base64 PEM certificate, PEM private key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1825))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode(), pem_key


def _serving_certificate(ca_b64: str, ca_key_pem: str, address: str, folder: Path) -> tuple[Path, Path]:
    """The API server's certificate for its address, signed by the cluster's CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca = x509.load_pem_x509_certificate(base64.b64decode(ca_b64))
    ca_key = serialization.load_pem_private_key(ca_key_pem.encode(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    names = [x509.IPAddress(ipaddress.ip_address(address)), x509.DNSName("kubernetes"),
             x509.DNSName("kubernetes.default"), x509.DNSName("kubernetes.default.svc")]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    cert_path, key_path = folder / "apiserver.crt", folder / "apiserver.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    return cert_path, key_path


def may_bind_443() -> bool:
    try:
        start = int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    except (OSError, ValueError):
        start = 1024
    return os.geteuid() == 0 or start <= 443


def _bindable(address: str, port: int) -> int | None:
    """The port (a free one for 0) if address:port can be bound now, else None."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return None
        return int(s.getsockname()[1])


def allocate_endpoint(world: World, home: Path, cluster_id: str) -> tuple[str, int]:
    """A loopback address no other cluster of this world, nor of any other world on this machine
    (a host-wide claim: its API server binds only once the cluster is running, so a free address
    alone could be picked by two worlds meanwhile), nor anything else here holds, and the API
    server's port there."""
    taken = world.names(ENDPOINTS)
    owner = external_ranges.owner_of(home)
    first = 88 + sum(str(home).encode()) % 8  # homes on one machine start apart
    with external_ranges.locked_claims(endpoint_registry()) as claims:
        external_ranges.drop_gone_homes(claims, owner)
        for second in [first, *(s for s in range(88, 96) if s != first)]:
            for third in range(1, 255):
                address = f"127.{second}.{third}.1"
                if address in taken or address in claims:
                    continue
                port = _bindable(address, 443 if may_bind_443() else 0)
                if port is not None:
                    taken[address] = cluster_id
                    claims[address] = owner
                    return address, port
    raise RuntimeError("no loopback address left for another simulated cluster's API server")


def endpoint_registry() -> Path:
    """Where this machine's simulated worlds claim cluster endpoints: beside the external
    ranges for root, in the temporary folder for another user (whose worlds are their own)."""
    if os.geteuid() == 0:
        return external_ranges.REGISTRY.with_name("cluster-endpoints.json")
    return Path(tempfile.gettempdir()) / f"trainctl-sim-{os.geteuid()}" / "cluster-endpoints.json"


def endpoint_of(kube: dict[str, Any]) -> str:
    """The cluster's `endpoint` as GKE answers it: an address (the API at 443)."""
    return kube["address"] if kube["port"] == 443 else f"{kube['address']}:{kube['port']}"


def ensure(sim: Simulator, cluster: dict[str, Any], node_names: tuple[str, ...],
           autoscaler: Callable[[JobController], None] | None = None) -> None:
    """The cluster's API server, started if this process does not serve it yet, with the
    cluster autoscaler that adds nodes for its waiting pods (None: the nodes stay as they are)."""
    kube = cluster.get("_kube")
    if not kube or cluster.get("status") not in LIVE:
        return
    home, cluster_id = str(sim.home), cluster["id"]
    with _LOCK:
        plane = _PLANES.setdefault(home, {}).get(cluster_id)
        if plane is None:
            plane = _start(sim, cluster, kube)
            if plane is None:
                return
            _PLANES[home][cluster_id] = plane
    if autoscaler is not None:  # a world the simulator starts over keeps its until the API serves it
        plane.api.autoscaler = autoscaler
    plane.api.set_nodes(node_names or ("gke-simulated-node-without-pool",), node_labels(cluster))


def node_labels(cluster: dict[str, Any]) -> dict[str, scheduling.Labels]:
    """Each node's labels, by node name, from its pool."""
    return {key.split("/", 1)[1]: scheduling.pool_node_labels(pool)
            for pool in cluster.get("pools", {}).values() for key in pool.get("nodes", [])}


def _start(sim: Simulator, cluster: dict[str, Any], kube: dict[str, Any]) -> ControlPlane | None:
    folder = sim.home / "kubernetes" / "clusters" / cluster["id"][:16]
    tls = _serving_certificate(cluster["masterAuth"]["clusterCaCertificate"], kube["ca_key"], kube["address"], folder)
    prefix = kube["address"].rsplit(".", 1)[0]
    pods = ProcessPods(sim.home, folder, prefix, kube["address"], kube["port"], sim.url)
    try:
        api = KubernetesApi(pods, auth.token(sim.home), host=kube["address"], port=kube["port"], tls=tls)
    except OSError as exc:  # another process serves this world's cluster (a second simulator)
        print(f"simulated cluster {cluster['name']}: its API server cannot listen at "
              f"{kube['address']}:{kube['port']}: {exc}", file=sys.stderr)
        return None
    return ControlPlane(cluster["id"], api)


def release(sim: Simulator, world: World, cluster: dict[str, Any]) -> None:
    """The cluster is going: its API server and pods stop (in the background: pods have a grace
    period), its address is free again."""
    kube = cluster.get("_kube") or {}
    if world.names(ENDPOINTS).pop(kube.get("address", ""), None) is not None:
        with external_ranges.locked_claims(endpoint_registry()) as claims:
            claims.pop(kube["address"], None)
    with _LOCK:
        plane = _PLANES.get(str(sim.home), {}).pop(cluster["id"], None)
    if plane is not None:
        closing = threading.Thread(target=plane.api.close, name=f"close-{cluster['name']}", daemon=True)
        _CLOSING.append(closing)
        closing.start()


def sync(sim: Simulator, world: World, clusters: list[tuple[dict[str, Any], tuple[str, ...]]]) -> None:
    """Serve every live cluster of the world; stop serving the ones that are gone."""
    for cluster, nodes in clusters:
        ensure(sim, cluster, nodes)
    live = {c["id"] for c, _ in clusters if c.get("status") in LIVE}
    with _LOCK:
        gone = [p for cid, p in _PLANES.get(str(sim.home), {}).items() if cid not in live]
    for plane in gone:
        release(sim, world, {"id": plane.cluster_id, "name": plane.cluster_id[:12]})
    existing = {c["id"] for c, _ in clusters}
    endpoints = world.names(ENDPOINTS)
    orphans = [a for a, cid in endpoints.items() if cid not in existing]
    if not orphans:
        return
    with external_ranges.locked_claims(endpoint_registry()) as claims:
        for address in orphans:  # a cluster that left the world without its delete
            del endpoints[address]
            claims.pop(address, None)


def alive(home: Path) -> bool:
    with _LOCK:
        return bool(_PLANES.get(str(home)))


def stop_all(home: Path) -> None:
    """The simulator stops: every cluster's API server and pods with it."""
    with _LOCK:
        planes = list(_PLANES.pop(str(home), {}).values())
    for plane in planes:
        plane.api.close()
    for closing in list(_CLOSING):
        closing.join(timeout=60)
        _CLOSING.remove(closing)


routes.STOPS.append(stop_all)
routes.ALIVE.append(alive)
