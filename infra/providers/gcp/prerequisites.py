"""What a GCP stack needs on this machine before trainctl runs anything: the Pulumi CLI logged in
to a backend (and the passphrase a self-managed one encrypts secrets with), the tools the stack's
kind of nodes needs, and Google credentials. Each missing piece is refused with the command that
supplies it, instead of a traceback or a prompt the Automation API cannot answer."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Mapping

from infra.providers.gcp.node_kinds import node_kind
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import ConfigError


def pulumi_backend_url(env: Mapping[str, str] | None = None) -> str | None:
    """The backend `pulumi` will use, as the CLI picks it: PULUMI_BACKEND_URL, else the
    `current` login in $PULUMI_HOME/credentials.json (default ~/.pulumi); None if not logged in."""
    env = os.environ if env is None else env
    if env.get("PULUMI_BACKEND_URL"):
        return env["PULUMI_BACKEND_URL"]
    home = Path(env.get("PULUMI_HOME") or Path.home() / ".pulumi")
    try:
        current = json.loads((home / "credentials.json").read_text()).get("current")
    except (OSError, ValueError):
        return None
    return current or None


def is_self_managed(backend: str) -> bool:
    """file://, gs://, s3://, azblob:// backends (not Pulumi Cloud): their stacks' secrets are
    encrypted with a passphrase by default, which `pulumi` prompts for when it is not given."""
    return not backend.startswith(("https://", "http://"))


def check_prerequisites(spec: ClusterSpec | None = None) -> None:
    """Actionable messages instead of tracebacks or hanging prompts, before anything is created."""
    if shutil.which("pulumi") is None:
        raise ConfigError(
            "gcp stacks need the Pulumi CLI, which is not on PATH: install it "
            "(https://www.pulumi.com/docs/install/) and log in (`pulumi login` or "
            "`pulumi login --local`). `trainctl plan` works without it.")
    backend = pulumi_backend_url()
    if backend is None and not os.environ.get("PULUMI_ACCESS_TOKEN"):
        raise ConfigError(
            "the Pulumi CLI is not logged in to a backend: run `pulumi login --local` (state in "
            "~/.pulumi), `pulumi login gs://<bucket>`, or `pulumi login` (Pulumi Cloud)")
    if (backend is not None and is_self_managed(backend)
            and not (os.environ.get("PULUMI_CONFIG_PASSPHRASE") or os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"))):
        # Without it `pulumi` stops at an interactive passphrase prompt (the stack's secrets,
        # e.g. a GKE kubeconfig output, are encrypted with it), which the Automation API cannot answer.
        raise ConfigError(
            f"the Pulumi backend {backend} keeps secrets encrypted with a passphrase: set "
            "PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) to the stack's passphrase")
    if spec is not None:
        node_kind(spec).check_tools()
    check_google_credentials()


def check_google_credentials() -> None:
    """All that `trainctl reap --project` needs (it calls Google's APIs, never Pulumi)."""
    if os.environ.get(API_ENDPOINT_ENV):
        return  # tests: the clients use anonymous credentials against a loopback fake
    try:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        google.auth.default()
    except DefaultCredentialsError:
        raise ConfigError(
            "no Google Cloud credentials found: run `gcloud auth application-default login`, "
            "or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file") from None
