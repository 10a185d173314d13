"""The local stack's container registry: the distribution's `docker-registry` (CNCF Distribution)
in a namespace of its own on the stack's bridge, serving TLS with a certificate made for this
stack, its blobs in the stack's state directory (so they go with the stack).

Nodes and the controller trust that one certificate through a cert dir (podman's and buildah's
`--cert-dir`): no registry is marked insecure, and no system-wide trust store is touched.

Every run's stack is new, and so is its registry: pushing the same torch layer into each would
copy hundreds of MB per run. The layers outlive the stack in the controller's cache instead
(`keep` at `down`, `seed` at `up`): blobs are content-addressed and never written in place, so
they are shared as hardlinks; the small per-repository index is copied. A push then finds its
layers present and sends only what changed, provided the pusher asks: containers/image skips a
layer without compressing it only where its blob-info cache knows the layer's compressed digest
at that registry name. Each stack's registry has its own address, so the controller pushes
through one stable name instead, a loopback port relayed to the current stack's registry for
the duration of the push.
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from pathlib import Path

from infra.providers.registry_alias import ALIAS_HOST


REGISTRY_PORT = 5000
REGISTRY_BINARY = "docker-registry"


def available() -> bool:
    return shutil.which(REGISTRY_BINARY) is not None


def write_certificate(cert_dir: Path, key_path: Path, ip: str, stack: str) -> None:
    """A self-signed certificate for the registry's address and the controller's loopback alias
    (infra/providers/registry_alias.py); `cert_dir/ca.crt` is what clients trust (containers/image reads *.crt
    there as CAs)."""
    from cryptography import x509  # at `up` only: every other command loads the realizer too
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"trainctl registry {stack}")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=8))  # longer than any stack's TTL
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip)),
                                                        x509.IPAddress(ipaddress.ip_address(ALIAS_HOST))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_dir.mkdir(parents=True, exist_ok=True)
    key_path.parent.mkdir(parents=True, exist_ok=True)
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    (cert_dir / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def config(data_dir: Path, listen: str, cert: Path, key: Path) -> str:
    # JSON is YAML: the registry reads this without a YAML writer here.
    import json

    return json.dumps({
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(data_dir)}, "delete": {"enabled": True}},
        "http": {"addr": listen, "tls": {"certificate": str(cert), "key": str(key)}},
    }, indent=2)


def start(netns: str, config_path: Path, log_path: Path) -> None:
    exe = shutil.which(REGISTRY_BINARY)
    assert exe is not None, "checked by available()"
    log = open(log_path, "ab")
    subprocess.run(["setsid", "-f", "ip", "netns", "exec", netns, exe, "serve", str(config_path)],
                   check=True, stdin=subprocess.DEVNULL, stdout=log, stderr=log)


BLOBS = "docker/registry/v2/blobs"
REPOSITORIES = "docker/registry/v2/repositories"


def seed(data_dir: Path, cache: Path) -> None:
    """A new registry's storage starts with the layers earlier stacks pushed."""
    if not (cache / BLOBS).is_dir():
        return
    (data_dir / BLOBS).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", "--link", str(cache / BLOBS), str((data_dir / BLOBS).parent)], check=True)
    if (cache / REPOSITORIES).is_dir():
        subprocess.run(["cp", "-a", str(cache / REPOSITORIES), str((data_dir / REPOSITORIES).parent)], check=True)


def keep(data_dir: Path, cache: Path) -> None:
    """What this stack's registry holds joins the cache (the registry has stopped). Best effort:
    a cache that misses a layer only costs a push."""
    if not (data_dir / BLOBS).is_dir():
        return
    (cache / BLOBS).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", "--link", "--no-clobber", str(data_dir / BLOBS), str((cache / BLOBS).parent)],
                   capture_output=True)
    if (data_dir / REPOSITORIES).is_dir():
        subprocess.run(["cp", "-a", "--no-clobber", str(data_dir / REPOSITORIES), str((cache / REPOSITORIES).parent)],
                       capture_output=True)
