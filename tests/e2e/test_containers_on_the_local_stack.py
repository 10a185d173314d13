"""Containers for real on the local stack: trainctl builds the digits DDP trainer into an image
(base from Debian's packages), pushes it to the stack's own registry (TLS, its own namespace),
every node pulls it into its own store and trains in it, to the accuracy the uv environment
reaches; a one-file change makes one new layer; nothing is left after `down`."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import REPO, experiment, leftovers, run_id_of, trainctl, undisturbed_training

pytestmark = pytest.mark.e2e

ARGS = "--epochs 3"


def libpod_cgroups() -> set[str]:
    return {str(p) for p in Path("/sys/fs/cgroup").glob("*/libpod_parent/libpod-*")}


def test_the_ddp_trainer_trains_in_a_container_as_in_its_uv_environment(tmp_path, trainctl_home):
    cgroups_before = libpod_cgroups()
    result = trainctl("run", str(experiment(tmp_path, ARGS, name="ctr", extra="container: {}\n")),
                      "--runs-dir", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run_id = run_id_of(result.stdout)
    out = tmp_path / "runs" / run_id
    in_container = json.loads((out / "metrics.json").read_text())
    assert "image" in json.loads((out / "timings.json").read_text())
    assert leftovers(run_id) == []  # registry process, namespaces, node image stores: gone
    # The same training in the uv environment bootstrap seeds nodes with, on 2 ranks.
    in_uv_env = undisturbed_training(2, ARGS.split())
    assert in_container["world_size"] == 2
    for key in ("test_accuracy", "steps", "world_size"):
        assert in_container[key] == in_uv_env[key], key
    assert "image 10.210." in result.stdout and "@sha256:" in result.stdout  # pulled by digest
    assert libpod_cgroups() <= cgroups_before  # every container removed with its cgroups


def registry_blobs(stack_home: Path, stack: str) -> set[str]:
    blobs = stack_home / "stacks" / stack / "registry" / "data" / "docker" / "registry" / "v2" / "blobs"
    return {p.parent.name for p in blobs.rglob("data")}


def diff_ids(ref: str) -> list[str]:
    from trainctl.jobs.image import build_env

    shown = subprocess.run(["buildah", "inspect", "--type", "image", ref], env=build_env(),
                           capture_output=True, text=True, check=True)
    return json.loads(shown.stdout)["OCIv1"]["rootfs"]["diff_ids"]


def test_a_one_file_change_builds_and_pushes_one_layer(tmp_path, trainctl_home, local_stack):
    code = tmp_path / "code"
    shutil.copytree(REPO / "trainers", code / "trainers", ignore=shutil.ignore_patterns("__pycache__"))
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"name: onefile\ncode: {code}\nrequirements: trainers/requirements.txt\n"
                   "run: {command: python -m trainers.digits_ddp}\ncontainer: {}\n")
    local_stack("imgs", nodes=1)

    def build() -> tuple[str, str]:
        result = trainctl("build", str(exp), "--stack", "imgs")
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        local, pushed = result.stdout.strip().splitlines()[-2:]
        assert local.startswith("localhost/trainctl/onefile:") and "/trainctl/onefile@sha256:" in pushed
        return local, pushed

    first, first_pushed = build()
    before = registry_blobs(trainctl_home, "imgs")
    (code / "trainers" / "digits_eval.py").write_text((code / "trainers" / "digits_eval.py").read_text() + f"# {uuid.uuid4()}\n")
    second, second_pushed = build()
    after = registry_blobs(trainctl_home, "imgs")
    assert first_pushed != second_pushed
    layers, changed = diff_ids(first), diff_ids(second)
    assert layers[:-1] == changed[:-1] and layers[-1] != changed[-1]  # only the code layer is new
    # and only it travelled, with its image config and manifest (the registry started with the
    # layers of earlier stacks: the edit is new, so its layer is too)
    assert len(after - before) == 3
    plan = trainctl("build", str(exp), "--plan")
    assert plan.returncode == 0 and plan.stdout.index("requirements") < plan.stdout.index("COPY code/")
