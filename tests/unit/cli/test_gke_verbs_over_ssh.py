"""Verbs that reach nodes over SSH say why not on a GKE stack, instead of failing inside."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from conftest import trainctl
from infra.providers.inventory import Inventory


@pytest.fixture
def gke_stack() -> Iterator[dict[str, str]]:
    home = Path("/var/lib/trainctl-tests") / f"gke-verbs-{uuid.uuid4().hex[:12]}"  # TRAINCTL_HOME: not under /tmp
    sdir = home / "stacks" / "my-gke"
    sdir.mkdir(parents=True, mode=0o700)
    (sdir / "provider").write_text("gcp\n")
    Inventory(stack="my-gke", provider="gcp", nodes=(), bucket_uri="gs://b", ssh_private_key="",
              known_hosts=str(sdir / "known_hosts"), kubeconfig=str(sdir / "kubeconfig"),
              gke_service_account="sa@p.iam.gserviceaccount.com").write(sdir / "inventory.json")
    try:
        yield {"TRAINCTL_HOME": str(home)}
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("verb", [["exec", "--stack", "my-gke", "--", "true"], ["status", "--stack", "my-gke"],
                                  ["ssh", "0", "--stack", "my-gke"],
                                  ["bootstrap", "--stack", "my-gke", "--code", "."]])
def test_ssh_verbs_on_a_gke_stack_are_refused_with_the_way_that_works(gke_stack, verb):
    result = trainctl(*verb, env=gke_stack)
    assert result.returncode == 2, result.stderr
    assert f"`trainctl {verb[0]}` reaches nodes over SSH, and stack my-gke has none" in result.stderr
    assert "trainctl launch --stack my-gke" in result.stderr and "Traceback" not in result.stderr


def test_a_stack_file_path_names_the_stack_it_declares(gke_stack, tmp_path):
    """A stack stood up from a file is found by that file again: its state is kept by name."""
    from infra.spec.stack_config import REPO_ROOT

    path = tmp_path / "Pulumi.my-gke.yaml"
    shutil.copy(REPO_ROOT / "stacks" / "Pulumi.gke-l4.yaml", path)
    result = trainctl("status", "--stack", str(path), env=gke_stack)
    assert result.returncode == 2, result.stderr
    assert "`trainctl status` reaches nodes over SSH, and stack my-gke has none" in result.stderr
