"""What the GCP realizer checks before it runs anything: a `pulumi` on PATH logged in to a backend,
the passphrase a self-managed backend encrypts secrets with, GKE's credential plugin, credentials.
A `pulumi` is on PATH here (the simulator's, written by write_launcher) and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.providers.gcp import prerequisites
from gcpsim.pulumi import write_launcher
from infra.spec.stack_config import ConfigError, load_stack


@pytest.fixture(autouse=True)
def only_pulumi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH holds a `pulumi` and nothing else (no gke-gcloud-auth-plugin of this machine), a
    local backend, and the credentials `gcloud auth application-default login` leaves."""
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    write_launcher(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path}/backend")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "test-passphrase")
    monkeypatch.delenv("TRAINCTL_GCP_API_ENDPOINT", raising=False)
    monkeypatch.setattr(google.auth, "default", lambda *a, **k: (AnonymousCredentials(), "proj"))


def test_passphrase_file_is_enough(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(tmp_path / "pass"))
    prerequisites.check_prerequisites(load_stack("gpu-t4x2"))


def test_cloud_backend_needs_no_passphrase(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    monkeypatch.setenv("PULUMI_BACKEND_URL", "https://api.pulumi.com")
    prerequisites.check_prerequisites(load_stack("gpu-t4x2"))


def test_backend_from_credentials_file(tmp_path: Path) -> None:
    home = tmp_path / "ph"
    home.mkdir()
    (home / "credentials.json").write_text(json.dumps({"current": "gs://state-bucket", "accounts": {}}))
    assert prerequisites.pulumi_backend_url({"PULUMI_HOME": str(home)}) == "gs://state-bucket"
    assert prerequisites.is_self_managed("gs://state-bucket") and prerequisites.is_self_managed("file://~")
    assert prerequisites.pulumi_backend_url({"PULUMI_HOME": str(tmp_path / "none")}) is None


def test_gke_stack_needs_the_auth_plugin() -> None:
    with pytest.raises(ConfigError, match="gke-gcloud-auth-plugin"):
        prerequisites.check_prerequisites(load_stack("gke-l4"))


def test_no_google_credentials_is_refused_with_the_command_that_makes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    def none(*_a: object, **_k: object) -> None:
        raise DefaultCredentialsError("Your default credentials were not found.")

    monkeypatch.setattr(google.auth, "default", none)
    with pytest.raises(ConfigError, match="gcloud auth application-default login"):
        prerequisites.check_prerequisites(load_stack("gpu-t4x2"))
