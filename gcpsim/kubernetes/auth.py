"""Who may call a simulated cluster's API: the holder of the simulator home's access token.

A GKE kubeconfig names no credential; its `exec` section runs `gke-gcloud-auth-plugin`, which
prints an ExecCredential (client.authentication.k8s.io/v1beta1) holding the user's Google
access token and its expiry (kubernetes/cloud-provider-gcp, cmd/gke-gcloud-auth-plugin). The
stand-in written into the simulator home's bin/ does the same with the home's own token, which
every simulated cluster's API server requires as its bearer token (401 without it), as GKE
requires a Google token of a principal allowed on the cluster. Not modelled: IAM on clusters
(any holder of the token may do anything), token refresh (the token lasts the home's life; the
expiry printed is an hour ahead, as Google's access tokens).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import secrets
import shlex
import sys
from pathlib import Path

PLUGIN = "gke-gcloud-auth-plugin"
LAUNCHER = """#!/bin/sh
# trainctl's simulated gke-gcloud-auth-plugin (gcpsim/kubernetes/auth.py): it hands
# out the access token of the simulator at {home}, not a Google token.
exec {python} -m gcpsim.kubernetes.auth --home {home} "$@"
"""


def token_path(home: Path) -> Path:
    return home / "kubernetes" / "token"


def token(home: Path) -> str:
    """The home's access token, made on first use (readable by its owner only)."""
    path = token_path(home)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"ya29.simulated-{secrets.token_urlsafe(32)}")
    return path.read_text().strip()


def write_auth_plugin(bin_dir: Path, home: Path) -> Path:
    """An executable gke-gcloud-auth-plugin in bin_dir that prints the home's credential."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / PLUGIN
    path.write_text(LAUNCHER.format(python=shlex.quote(sys.executable), home=shlex.quote(str(home))))
    path.chmod(0o755)
    return path


def exec_credential(home: Path, api_version: str) -> dict[str, object]:
    expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    return {"kind": "ExecCredential", "apiVersion": api_version, "spec": {"interactive": False},
            "status": {"expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ"), "token": token(home)}}


def main() -> None:
    parser = argparse.ArgumentParser(prog=PLUGIN, description="simulated: prints the GCP simulator's token")
    parser.add_argument("--home", type=Path, required=True)
    args, _ = parser.parse_known_args()  # the real plugin's flags (--use_application_default_credentials) mean nothing here
    if not token_path(args.home).exists():
        print(f"{PLUGIN} (simulated): no simulator at {args.home}; `trainctl up --simulate` makes one",
              file=sys.stderr)
        sys.exit(1)
    # The client says which version it speaks (KUBERNETES_EXEC_INFO); the real plugin answers v1beta1.
    info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "{}")
    print(json.dumps(exec_credential(args.home, info.get("apiVersion") or "client.authentication.k8s.io/v1beta1")))


if __name__ == "__main__":
    main()
