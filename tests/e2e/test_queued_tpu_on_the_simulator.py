"""A queued spot TPU in a simulated project, end to end: `up` asks for it with the whole node
the stack declares and waits until the queue grants it; the granted TPU VM is a real machine
that admits the stack's SSH key and bootstrap reaches over pinned host keys; `down` deletes
the queued resource with its TPU and leaves nothing."""

from __future__ import annotations

import json

import pytest

from infra.providers.stack_home import state_dir
from tests.conftest import trainctl
from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, simulated_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e

STACK = "tpu-v5e-8-queued"


def _tpu_collections(home) -> dict:
    world = json.loads((home / "simulator" / "world.json").read_text())
    collections = world["projects"]["my-project"].get("collections", {})
    return {kind: collections.get(kind, {}) for kind in ("tpu.queuedResources", "tpu.nodes")}


def test_a_queued_tpu_is_granted_after_waiting_with_the_stacks_key_and_bootstrapped(simulated_home, tmp_path):
    project_file = tmp_path / "project.yaml"
    project_file.write_text("project: my-project\ndelays: {tpu_qr_grant: 3}\n")
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('hello from a queued TPU')\n")
    up = trainctl("up", "--stack", STACK, "--simulate", "--simulated-project", str(project_file), timeout=600)
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    assert up.stderr.index("WAITING_FOR_RESOURCES, waited") < up.stderr.index(f"{STACK}-tpu: ACTIVE")
    granted = _tpu_collections(simulated_home)["tpu.nodes"][f"us-west4-a/{STACK}-tpu"]
    public = (state_dir(STACK) / "keys" / "id_ed25519.pub").read_text().split()[1]
    assert public in granted["metadata"]["ssh-keys"] and granted["tags"] == [f"{STACK}-node"]
    assert granted["labels"]["trainctl-stack"] == STACK and granted["schedulingConfig"] == {"spot": True}

    boot = trainctl("bootstrap", "--stack", STACK, "--code", str(code), timeout=600)
    assert boot.returncode == 0, boot.stdout[-3000:] + boot.stderr[-3000:]
    ran = trainctl("exec", "--stack", STACK, "--", "python3", "train.py", timeout=120)
    assert ran.returncode == 0 and "hello from a queued TPU" in ran.stdout, ran.stdout + ran.stderr

    down = trainctl("down", "--stack", STACK, timeout=600)
    assert down.returncode == 0, down.stdout[-3000:] + down.stderr[-3000:]
    assert f"deleting queued TPU projects/my-project/locations/us-west4-a/queuedResources/{STACK}-tpu" in down.stderr
    assert _tpu_collections(simulated_home) == {"tpu.queuedResources": {}, "tpu.nodes": {}}
    assert _leftovers(simulated_home) == []
