"""SSH key material per stack: one client key, and (where we create the nodes) their host keys.

Private keys are written 0600 into 0700 directories and never copied into state, inventory,
logs or Pulumi outputs; only public keys travel.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_ed25519_keypair(private_path: Path, comment: str) -> str:
    """Create an OpenSSH ed25519 key pair; returns the public key line."""
    # imported here: the realizers load this module for every command, and only `up` makes keys
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    private_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(private)
    line = f"{public} {comment}"
    Path(f"{private_path}.pub").write_text(line + "\n")
    return public


def read_public_key(private_path: Path) -> str:
    """The "type base64" part of a key's .pub file (without its comment)."""
    return " ".join(Path(f"{private_path}.pub").read_text().split()[:2])
