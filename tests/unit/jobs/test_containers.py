"""Containers as plans: the image's layers, the nodes' runtime and pull steps, the launch line in
the image, the Artifact Registry the GCP program declares and what `run` refuses before anything
exists. The real build, registry and run: tests/e2e/test_containers_on_the_local_stack.py."""

from __future__ import annotations

import shlex
import shutil
import uuid
from pathlib import Path

import pytest

from bootstrap.containers import pull_command, runtime_command
from conftest import TEST_HOMES
from bootstrap.plan import BootstrapSpec, plan as bootstrap_plan
from infra.providers.gcp.program.mocks import evaluate
from infra.providers.inventory import Inventory, Node, Registry
from namespace_nodes.sshd import cgroup_mounts
from infra.spec.stack_config import ConfigError, load_stack
from trainctl.jobs.experiment_spec import build_experiment
from trainctl.jobs.image import IMAGE_VENV, ImageSpec, containerfile
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import node_command

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"
IMAGE = "10.210.5.3:5000/trainctl/digits@sha256:" + "a" * 64
LOCAL_REGISTRY = Registry(repository="10.210.5.3:5000/trainctl", cert_dir="/state/registry/certs")


def inventory(accelerator: str = "cpu", registry: Registry | None = LOCAL_REGISTRY) -> Inventory:
    return Inventory(
        stack="s", provider="local", bucket_uri="gs://bkt", registry=registry,
        nodes=tuple(Node(name=f"node{i}", rank=i, internal_ip=f"10.0.0.{10 + i}", ssh_host=f"10.0.0.{10 + i}",
                         host_keys=(KEY,), accelerator=accelerator, workdir=f"/w/node{i}", interface="eth0")
                    for i in range(2)),
        ssh_private_key="/k/id", known_hosts="/k/known_hosts")


@pytest.fixture
def code(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "requirements.txt").write_text("numpy\n")
    return tmp_path


def test_the_image_puts_what_changes_least_first(code):
    with_reqs = containerfile(ImageSpec(name="d", code=BootstrapSpec(code_dir=code, requirements="requirements.txt")),
                              "localhost/trainctl/base:1")
    lines = with_reqs.splitlines()
    assert lines[0] == "FROM localhost/trainctl/base:1"
    order = [next(i for i, line in enumerate(lines) if line.startswith(p))
             for p in ("COPY requirements/", "RUN cd /opt/trainctl/requirements", "COPY code/")]
    assert order == sorted(order)  # a code change leaves the environment layer cached
    assert "UV_OFFLINE=1" in with_reqs  # built from the controller's cache, no network in the build
    assert f"PATH={IMAGE_VENV}/bin:" in with_reqs  # `python` and `torchrun` are the environment's
    bare = containerfile(ImageSpec(name="d", code=BootstrapSpec(code_dir=code)), "localhost/trainctl/base:1")
    assert "requirements" not in bare and "COPY code/" in bare


def test_the_requirements_layer_carries_the_local_files_its_requirements_name(code, monkeypatch):
    from trainctl.jobs.image import prepare_context

    cache = TEST_HOMES / f"cache-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("TRAINCTL_CACHE", str(cache))
    try:
        (code / "ab12").mkdir()
        (code / "ab12" / "trainer-0.1-py3-none-any.whl").write_bytes(b"PK")  # staged from packageUris
        (code / "requirements.txt").write_text("# gs://b/trainer-0.1.tar.gz\n./ab12/trainer-0.1-py3-none-any.whl\nnumpy\n")
        spec = ImageSpec(name="d", code=BootstrapSpec(code_dir=code, requirements="requirements.txt"))
        layer = prepare_context(spec) / "requirements"
        assert sorted(str(p.relative_to(layer)) for p in layer.rglob("*") if p.is_file()) == [
            "ab12/trainer-0.1-py3-none-any.whl", "requirements.txt"]
        (code / "requirements.txt").write_text("./missing.whl\n")
        with pytest.raises(ConfigError, match="names missing.whl"):
            prepare_context(spec)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def test_bootstrap_with_an_image_pulls_it_instead_of_syncing(code):
    spec = BootstrapSpec(code_dir=code, requirements="requirements.txt", image=IMAGE)
    for node_plan in bootstrap_plan(inventory(), spec):
        assert [s.name for s in node_plan.steps] == ["ready", "drivers", "runtime", "pull"]
        pull = node_plan.steps[-1]
        assert f"podman pull -q --cert-dir /state/registry/certs {IMAGE}" in pull.command
        # each node's own store, named for podman in every step that runs it
        assert f"CONTAINERS_STORAGE_CONF=/w/{node_plan.node.name}/.trainctl/containers/storage.conf" in pull.command
        assert pull.fingerprint and node_plan.steps[-2].fingerprint


def test_setup_commands_and_an_image_are_refused_together(code):
    with pytest.raises(ValueError, match="build what they do into the image"):
        BootstrapSpec(code_dir=code, setup=("make",), image=IMAGE)


def test_the_node_runtime_takes_the_nodes_own_limits_and_keeps_a_private_store():
    node = inventory().nodes[1]
    command = runtime_command(node)
    assert 'graphroot = "/w/node1/.trainctl/containers/storage"' in command
    assert '"$(ulimit -Hn)"' in command and "pid_max" in command
    assert "nvidia-ctk" not in command
    gpu = runtime_command(inventory("gpu:1xnvidia-l4").nodes[0])
    assert "nvidia-ctk cdi generate" in gpu


def test_launch_runs_the_same_program_inside_the_image():
    inv = inventory()
    spec = LaunchSpec(run_id="r-1", command=("python", "-m", "trainers.digits_ddp", "--job-dir", "{job_dir}"),
                      image=IMAGE)
    command = node_command(inv, inv.nodes[1], spec)
    argv = shlex.split(command.split("exec ", 1)[1])
    image_at = argv.index(IMAGE)
    podman, program = argv[:image_at], argv[image_at + 1:]
    assert podman[:4] == ["podman", "run", "--rm", "--init"]
    assert podman[podman.index("--network") + 1] == "host"
    passed = {podman[i + 1] for i, a in enumerate(podman) if a == "--env"}
    assert {"TRAINCTL_RUN_ID", "AIP_MODEL_DIR", "CLUSTER_SPEC", "GLOO_SOCKET_IFNAME"} <= passed
    assert "PATH" not in passed  # the image's PATH leads to its environment
    # the program replaces the image's ENTRYPOINT; the image's PATH leads to its own environment
    assert podman[podman.index("--entrypoint") + 1] == "torchrun"
    assert "--rdzv-endpoint=10.0.0.10:29400" in program
    assert program[-4:] == ["--module", "trainers.digits_ddp", "--job-dir", "gs://bkt/r-1"]
    assert "CONTAINERS_CONF=/w/node1/.trainctl/containers/containers.conf" in command
    tf = node_command(inv, inv.nodes[0], spec.model_copy(update={"framework": "tensorflow"}))
    assert f"--entrypoint python {IMAGE} -m trainers.digits_ddp" in tf


@pytest.mark.parametrize("accelerator, flag", [("gpu:1xnvidia-l4", "nvidia.com/gpu=all"), ("tpu:v5litepod-8", "--privileged")])
def test_accelerators_reach_the_container(accelerator, flag):
    inv = inventory(accelerator)
    command = node_command(inv, inv.nodes[0], LaunchSpec(run_id="r", command=("python", "t.py"), image=IMAGE))
    assert flag in command


def test_artifact_registry_pulls_log_in_with_the_nodes_token_through_a_pipe():
    ar = Registry(repository="us-central1-docker.pkg.dev/p/s-images", metadata_token=True)
    command = pull_command("us-central1-docker.pkg.dev/p/s-images/d@sha256:" + "b" * 64, ar)
    assert "service-accounts/default/token" in command
    assert "--password-stdin us-central1-docker.pkg.dev" in command
    assert "--cert-dir" not in command


def test_the_gcp_program_declares_a_registry_only_the_clusters_account_reads():
    spec = load_stack("gpu-t4x2")
    ev = evaluate(spec)
    (repo,) = ev.of_type("artifactregistry/repository:Repository")
    assert repo.inputs["format"] == "DOCKER"
    assert repo.inputs["location"] == "us-central1"
    assert repo.inputs["repositoryId"] == f"{spec.name}-images"
    (grant,) = ev.of_type("artifactregistry/repositoryIamMember:RepositoryIamMember")
    assert grant.inputs["role"] == "roles/artifactregistry.reader"
    (account,) = ev.of_type("serviceaccount/account:Account")
    assert grant.inputs["member"] == f"serviceAccount:{account.inputs['accountId']}@{spec.project}.iam.gserviceaccount.com"
    assert ev.outputs["inventory"]["registry"] == {
        "repository": f"us-central1-docker.pkg.dev/{spec.project}/{spec.name}-images", "metadata_token": True}


def test_experiments_name_only_images_trainctl_built_and_no_setup(tmp_path):
    base = {"name": "c", "code": ".", "run": {"command": "python t.py"}}
    with pytest.raises(ConfigError, match="trainctl runs images it built"):
        build_experiment({**base, "container": {"image": "docker.io/library/python:3.11"}}, tmp_path / "e.yaml")
    with pytest.raises(ConfigError, match="build what they do into the image"):
        build_experiment({**base, "setup": ["make"], "container": {}}, tmp_path / "e.yaml")
    assert build_experiment({**base, "container": {}}, tmp_path / "e.yaml").container is not None


def test_nodes_mount_the_hosts_cgroup_hierarchies_again():
    mountinfo = "\n".join([
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu",
        "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd",
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
        "50 23 0:40 / /proc rw - proc proc rw"])
    assert cgroup_mounts(mountinfo) == [
        "mount -t tmpfs -o mode=0755 cgroup /sys/fs/cgroup",
        "mkdir -p /sys/fs/cgroup/cpu && mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu",
        "mkdir -p /sys/fs/cgroup/systemd && mount -t cgroup -o name=systemd cgroup /sys/fs/cgroup/systemd",
        "mkdir -p /sys/fs/cgroup/unified && mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified"]
    assert cgroup_mounts("1 0 0:1 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate") == [
        "mkdir -p /sys/fs/cgroup && mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup"]


def test_an_artifact_registry_image_is_used_as_is_on_gcp_and_refused_on_the_local_stack(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from trainctl.jobs.experiment import bootstrap_spec, start_image

    image = "us-central1-docker.pkg.dev/p/repo/trainer:1"
    exp = build_experiment({"name": "c", "code": ".", "run": {"command": "python t.py"},
                            "container": {"image": image}}, tmp_path / "e.yaml")
    with ThreadPoolExecutor(max_workers=1) as pool:
        with pytest.raises(ConfigError, match="local nodes cannot reach"):
            start_image(exp, load_stack("local"), bootstrap_spec(exp, "python3"), tmp_path / "b.log", pool, print)
        got = start_image(exp, load_stack("gpu-t4x2"), bootstrap_spec(exp, "python3"), tmp_path / "b.log", pool, print)
        assert got is not None and got.result() == image  # nothing built, nothing pushed


def test_gke_jobs_run_the_experiments_image():
    from trainctl.launchers.gke.manifests import manifests

    inv = Inventory(stack="g", provider="gcp", nodes=(), bucket_uri="gs://bkt", ssh_private_key="", known_hosts="")
    spec = LaunchSpec(run_id="r1", command=("python", "-m", "trainers.digits_ddp"),
                      image="us-central1-docker.pkg.dev/p/g-images/d@sha256:" + "d" * 64)
    *_, job = manifests(load_stack("gke-l4"), inv, spec, gsa="g-sa@p.iam.gserviceaccount.com")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["image"] == spec.image
