"""The GCP realizer: `pulumi up`/`destroy` on this project through the Automation API, then the
nodes' host keys from their guest attributes, written into the same Inventory the local stack uses.

The validated ClusterSpec travels to the program as TRAINCTL_SPEC_JSON, so ephemeral stacks
(one per experiment) need no config file and the program never re-reads raw config.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from infra import keys
from infra.gcp.reaper import API_ENDPOINT_ENV, google_client
from infra.inventory import Inventory, Node
from infra.local.state import stack_lock, state_dir
from infra.spec import ClusterSpec
from infra.stack_config import REPO_ROOT, ConfigError

HOST_KEY_TIMEOUT = 600.0
SPEC_ENV = "TRAINCTL_SPEC_JSON"
POLICY_PACK_DIR = "policy"


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
    if spec is not None and spec.kind == "gke" and shutil.which("gke-gcloud-auth-plugin") is None:
        raise ConfigError(
            "GKE stacks need gke-gcloud-auth-plugin on PATH (the kubeconfig trainctl writes uses it): "
            "`gcloud components install gke-gcloud-auth-plugin`, or the "
            "google-cloud-cli-gke-gcloud-auth-plugin package")
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


def policy_packs() -> list[str]:
    """GCP's documented constraints, enforced by the engine on every `up` (the repo's pack)."""
    pack = REPO_ROOT / POLICY_PACK_DIR
    return [str(pack)] if (pack / "PulumiPolicy.yaml").is_file() else []


def _stack(spec_or_name: ClusterSpec | str, env: dict[str, str]):
    from pulumi import automation as auto

    name = spec_or_name if isinstance(spec_or_name, str) else spec_or_name.name
    return auto.create_or_select_stack(
        stack_name=name, work_dir=str(REPO_ROOT),
        opts=auto.LocalWorkspaceOptions(env_vars=env))


def up(spec: ClusterSpec, progress: Callable[[str], None]) -> Inventory:
    check_prerequisites(spec)
    sdir = state_dir(spec.name)
    with stack_lock(spec.name, "up"):
        sdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        client_key = sdir / "keys" / "id_ed25519"
        public = (keys.read_public_key(client_key) if client_key.exists()
                  else keys.write_ed25519_keypair(client_key, f"trainctl@{spec.name}"))
        meta_path = sdir / "gcp.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {
            "expires_at": int(time.time() + spec.ttl_hours * 3600), "spec": spec.model_dump(mode="json")}
        meta_path.write_text(json.dumps(meta, indent=2))
        env = {SPEC_ENV: spec.model_dump_json(), "TRAINCTL_SSH_PUBLIC_KEY": public,
               "TRAINCTL_EXPIRES_AT": str(meta["expires_at"])}
        stack = _stack(spec, env)
        result = stack.up(on_output=progress, policy_packs=policy_packs())
        partial = result.outputs["inventory"].value
        kubeconfig = None
        if "kubeconfig" in result.outputs:
            kubeconfig = sdir / "kubeconfig"
            fd = os.open(kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(result.outputs["kubeconfig"].value)
        nodes = partial["nodes"]
        host_keys = fetch_host_keys(spec, nodes, progress)
        inventory = Inventory(
            stack=spec.name, provider="gcp", bucket_uri=partial["bucket_uri"],
            nodes=tuple(Node(**{**n, "host_keys": tuple(host_keys[n["name"]])}) for n in nodes),
            ssh_private_key=str(client_key), known_hosts=str(sdir / "keys" / "known_hosts"),
            kubeconfig=str(kubeconfig) if kubeconfig else None,
            gke_service_account=partial.get("gke_service_account"))
        Path(inventory.known_hosts).write_text("\n".join(inventory.known_hosts_lines()) + "\n")
        inventory.write(sdir / "inventory.json")
        return inventory


def down(stack_name: str, progress: Callable[[str], None]) -> bool:
    check_prerequisites()
    sdir = state_dir(stack_name)
    with stack_lock(stack_name, "down") as remove_lock:
        meta_path = sdir / "gcp.json"
        env = {}
        if meta_path.exists():
            meta = json.loads(meta_path.read_text())
            env = {SPEC_ENV: json.dumps(meta["spec"]), "TRAINCTL_SSH_PUBLIC_KEY": "unused",
                   "TRAINCTL_EXPIRES_AT": str(meta["expires_at"])}
        stack = _stack(stack_name, env)
        outputs = stack.outputs()
        stack.destroy(on_output=progress)
        if outputs.get("bucket_kept_on_down") and outputs["bucket_kept_on_down"].value:
            bucket = outputs["bucket"].value
            progress(f"bucket {bucket} is kept (a named stack's checkpoints outlive it); "
                     f"delete it with `gcloud storage rm -r {bucket}`")
        # preserve_config: `pulumi stack rm` otherwise deletes stacks/Pulumi.<stack>.yaml, a
        # tracked file the user wrote (ephemeral stacks have none, so nothing is left behind).
        stack.workspace.remove_stack(stack_name, preserve_config=True)
        shutil.rmtree(sdir, ignore_errors=True)
        remove_lock()
        return True


def fetch_host_keys(spec: ClusterSpec, nodes: list[dict[str, Any]],
                    progress: Callable[[str], None]) -> dict[str, list[str]]:
    """Host keys as the guest agent published them (guest attributes, namespace hostkeys/).
    Read through the authenticated API, so no key is learned over the network it protects."""
    deadline = time.monotonic() + HOST_KEY_TIMEOUT
    found: dict[str, list[str]] = {}
    while True:
        if spec.kind == "tpu":
            found.update(_tpu_host_keys(spec))
        else:
            for n in nodes:
                if n["name"] not in found:
                    keys_ = _instance_host_keys(spec, n["name"])
                    if keys_:
                        found[n["name"]] = keys_
        missing = [n["name"] for n in nodes if not found.get(n["name"])]
        if not missing:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"no host keys published by {', '.join(missing)} after "
                               f"{HOST_KEY_TIMEOUT:.0f} s (is the guest environment installed?)")
        progress(f"waiting for host keys of {len(missing)} node(s)")
        time.sleep(5)


def _instance_host_keys(spec: ClusterSpec, instance: str) -> list[str]:
    from google.api_core.exceptions import NotFound
    from google.cloud import compute_v1

    try:
        attrs = google_client(compute_v1.InstancesClient).get_guest_attributes(
            request=compute_v1.GetGuestAttributesInstanceRequest(
                project=spec.project, zone=spec.zone, instance=instance, query_path="hostkeys/"))
    except NotFound:
        return []
    return [f"{item.key} {item.value}" for item in attrs.query_value.items]


def _tpu_node_path(spec: ClusterSpec) -> str:
    from infra.gcp.tpu import tpu_name

    return f"projects/{spec.project}/locations/{spec.zone}/nodes/{tpu_name(spec)}"


def _tpu_host_keys(spec: ClusterSpec) -> dict[str, list[str]]:
    from google.api_core.exceptions import NotFound
    from google.cloud import tpu_v2

    from infra.gcp.tpu import tpu_name

    try:
        resp = google_client(tpu_v2.TpuClient).get_guest_attributes(
            request=tpu_v2.GetGuestAttributesRequest(name=_tpu_node_path(spec), query_path="hostkeys/"))
    except NotFound:
        return {}
    # GuestAttributes carries no worker id: the API answers one entry per worker, in worker
    # order (worker 0 first), which is also the order of the node's networkEndpoints.
    return {f"{tpu_name(spec)}-w{worker}": [f"{item.key} {item.value}" for item in attr.query_value.items]
            for worker, attr in enumerate(resp.guest_attributes)}
