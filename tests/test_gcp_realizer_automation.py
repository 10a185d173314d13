"""realizer.up / realizer.down through the REAL pulumi Automation API, against the stand-in
`pulumi` executable (tests/fake_pulumi/pulumi) on PATH and the loopback fake of Google's APIs.
Assertions are on what the real CLI would have received."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from gcp_fake import FakeGoogleServer, google  # noqa: F401 (fixture)
from infra.gcp import realizer
from infra.stack_config import REPO_ROOT, ConfigError, load_stack

FAKE_CLI_DIR = Path(__file__).parent / "fake_pulumi"
ED = {"namespace": "hostkeys", "key": "ssh-ed25519", "value": "AAAAC3NzaC1lZDI1NTE5AAAAIHostKey"}



@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the Pulumi project (Pulumi.yaml, stacks/), the working directory, so a CLI that
    deletes a stack's config file deletes the copy, never the repo's tracked file."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(REPO_ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copytree(REPO_ROOT / "stacks", root / "stacks")
    monkeypatch.chdir(root)  # trainctl finds the project from the working directory
    return root


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """TRAINCTL_HOME may not sit under /tmp (local nodes see /tmp as private): a private one
    under the tests' homes, removed afterwards."""
    base = Path("/var/lib/trainctl-tests")
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = Path(tempfile.mkdtemp(prefix="gcp-realizer-", dir=base))
    monkeypatch.setenv("TRAINCTL_HOME", str(path))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, project: Path, home: Path) -> Path:
    """The stand-in CLI first on PATH, its state dir, a local backend with a passphrase, and
    credentials for check_prerequisites (the API clients themselves use the fake endpoint)."""
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    state = tmp_path / "pulumi-state"
    state.mkdir()
    # PATH holds only a launcher of the stand-in (run by this interpreter), so neither a real
    # `pulumi` nor tools installed on this machine (gke-gcloud-auth-plugin) leak into the test.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "pulumi"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CLI_DIR / "pulumi"}" "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_PULUMI_STATE", str(state))
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path}/backend")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "test-passphrase")
    monkeypatch.setattr(google.auth, "default", lambda *a, **k: (AnonymousCredentials(), "proj"))
    return state


def calls(state: Path) -> list[dict[str, Any]]:
    """Each CLI invocation; argv without the global --non-interactive the SDK puts first."""
    out = []
    for line in (state / "calls.jsonl").read_text().splitlines():
        call = json.loads(line)
        call["interactive"] = "--non-interactive" not in call["argv"]
        call["argv"] = [a for a in call["argv"] if a != "--non-interactive"]
        out.append(call)
    return out


def command(state: Path, *prefix: str) -> dict[str, Any]:
    return next(c for c in calls(state) if c["argv"][:len(prefix)] == list(prefix))


def set_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outputs: dict[str, Any]) -> None:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs))
    monkeypatch.setenv("FAKE_PULUMI_OUTPUTS", str(path))


def vm_outputs(spec: Any) -> dict[str, Any]:
    nodes = [{"name": f"{spec.name}-w{i}", "rank": i, "role": "worker", "internal_ip": f"10.0.0.{i + 2}",
              "ssh_host": f"34.1.1.{i + 2}", "ssh_user": spec.ssh.user, "accelerator": str(spec.accelerator),
              "workdir": "/home/trainctl/trainctl"} for i in range(2)]
    return {"inventory": {"value": {"nodes": nodes, "bucket_uri": f"gs://{spec.name}-bucket"}, "secret": False},
            "bucket": {"value": f"gs://{spec.name}-bucket", "secret": False},
            "bucket_kept_on_down": {"value": not spec.ephemeral, "secret": False}}


def test_up_then_down_of_a_named_vm_stack(google: FakeGoogleServer, cli: Path, project: Path,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_stack("gpu-t4x2")
    for i in range(2):
        google.state.instances[(spec.project, spec.zone, f"{spec.name}-w{i}")] = {"labels": {}}
        google.state.instance_guest_attributes[(spec.project, spec.zone, f"{spec.name}-w{i}")] = [ED]
    set_outputs(tmp_path, monkeypatch, vm_outputs(spec))

    inventory = realizer.up(spec, lambda _line: None)

    up = command(cli, "up")
    assert not up["interactive"]
    assert up["argv"][up["argv"].index("--policy-pack") + 1] == str(REPO_ROOT / "policy")  # trainctl's pack
    assert json.loads(up["env"][realizer.SPEC_ENV])["name"] == spec.name
    assert up["env"]["TRAINCTL_SSH_PUBLIC_KEY"].startswith("ssh-ed25519 ")
    assert up["cwd"] == str(project)
    assert [n.host_keys for n in inventory.nodes] == [(f"ssh-ed25519 {ED['value']}",)] * 2
    assert inventory.bucket_uri == f"gs://{spec.name}-bucket" and inventory.kubeconfig is None
    known = Path(inventory.known_hosts).read_text().splitlines()
    assert known == [f"34.1.1.{i + 2} ssh-ed25519 {ED['value']}" for i in range(2)]

    said: list[str] = []
    assert realizer.down(spec.name, progress=said.append) is True
    # the named stack's bucket is kept on purpose (defect 4), and down says how to remove it
    assert f"delete it with `gcloud storage rm -r gs://{spec.name}-bucket`" in said[-1]
    rm = command(cli, "stack", "rm")
    assert "--preserve-config" in rm["argv"]
    assert (project / "stacks" / f"Pulumi.{spec.name}.yaml").is_file()  # the user's file stays
    assert [c["argv"][0] for c in calls(cli)].count("destroy") == 1


GSA = "gke-test-sa@p.iam.gserviceaccount.com"


def test_gke_kubeconfig_is_a_secret_written_0600(google: FakeGoogleServer, cli: Path, project: Path,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_stack("gke-l4", name="gke-test")
    plugin = tmp_path / "bin" / "gke-gcloud-auth-plugin"
    plugin.write_text("#!/bin/sh\nexit 0\n")
    plugin.chmod(0o755)
    set_outputs(tmp_path, monkeypatch, {
        # the shape infra/gcp/program.py exports for a GKE stack
        "inventory": {"value": {"stack": spec.name, "provider": "gcp", "kind": "gke", "nodes": [],
                                "bucket_uri": "gs://b", "gke_service_account": GSA}, "secret": False},
        "kubeconfig": {"value": "apiVersion: v1\nkind: Config\n", "secret": True}})
    inventory = realizer.up(spec, lambda _line: None)
    # the pods' identity reaches the manifests (defect 5): without it bucket writes get 403
    assert inventory.gke_service_account == GSA
    assert inventory.kubeconfig is not None
    path = Path(inventory.kubeconfig)
    assert path.read_text().startswith("apiVersion: v1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # the SDK reads the masked and the plaintext outputs: the stand-in masked the secret
    outputs = [c["argv"] for c in calls(cli) if c["argv"][:2] == ["stack", "output"]]
    assert any("--show-secrets" in a for a in outputs) and any("--show-secrets" not in a for a in outputs)


def test_a_local_backend_without_passphrase_is_refused_before_anything_runs(
        cli: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    with pytest.raises(ConfigError, match="PULUMI_CONFIG_PASSPHRASE"):
        realizer.up(load_stack("gpu-t4x2"), lambda _line: None)
    assert not (cli / "calls.jsonl").exists()


def test_passphrase_file_is_enough(cli: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(tmp_path / "pass"))
    realizer.check_prerequisites(load_stack("gpu-t4x2"))


def test_cloud_backend_needs_no_passphrase(cli: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")
    monkeypatch.setenv("PULUMI_BACKEND_URL", "https://api.pulumi.com")
    realizer.check_prerequisites(load_stack("gpu-t4x2"))


def test_backend_from_credentials_file(tmp_path: Path) -> None:
    home = tmp_path / "ph"
    home.mkdir()
    (home / "credentials.json").write_text(json.dumps({"current": "gs://state-bucket", "accounts": {}}))
    assert realizer.pulumi_backend_url({"PULUMI_HOME": str(home)}) == "gs://state-bucket"
    assert realizer.is_self_managed("gs://state-bucket") and realizer.is_self_managed("file://~")
    assert realizer.pulumi_backend_url({"PULUMI_HOME": str(tmp_path / "none")}) is None


def test_gke_stack_needs_the_auth_plugin(cli: Path) -> None:
    with pytest.raises(ConfigError, match="gke-gcloud-auth-plugin"):
        realizer.check_prerequisites(load_stack("gke-l4"))


def test_up_of_a_multi_host_tpu_pins_each_workers_host_key(google: FakeGoogleServer, cli: Path,
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The day-one crash of defect 2: `up` of a TPU stack reads every worker's key."""
    spec = load_stack("tpu-v5e-16", name="tpu-test")
    node = f"projects/{spec.project}/locations/{spec.zone}/nodes/tpu-test-tpu"
    google.state.tpu_nodes[node] = {"state": "READY"}
    google.state.tpu_guest_attributes[node] = [[{**ED, "value": f"K{i}"}] for i in range(4)]
    nodes = [{"name": f"tpu-test-tpu-w{i}", "rank": i, "role": "tpu-worker", "internal_ip": f"10.0.0.{i + 2}",
              "ssh_host": f"34.2.2.{i + 2}", "ssh_user": spec.ssh.user, "accelerator": str(spec.accelerator),
              "workdir": "/home/trainctl/trainctl", "tpu_name": "tpu-test-tpu"} for i in range(4)]
    set_outputs(tmp_path, monkeypatch, {"inventory": {"value": {"nodes": nodes, "bucket_uri": "gs://b"},
                                                      "secret": False}})
    inventory = realizer.up(spec, lambda _line: None)
    assert [n.host_keys for n in inventory.nodes] == [(f"ssh-ed25519 K{i}",) for i in range(4)]
    up = command(cli, "up")
    assert up["env"]["PULUMI_CONFIG_PASSPHRASE"] == "test-passphrase"  # no prompt to stop at


# --- a stack made by `pulumi up` alone, then used by trainctl ------------------------------

def pulumi_up_by_hand(cli: Path, project: Path, stack: str) -> None:
    """What a user does in the repo: `pulumi stack init` + `pulumi up`, no trainctl involved."""
    import subprocess

    for argv in (["stack", "init", stack], ["up", "--yes", "--skip-preview", "--stack", stack]):
        subprocess.run(["pulumi", *argv], cwd=project, check=True, capture_output=True)


@pytest.fixture
def user_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The user's own ~/.ssh/id_ed25519, which a plain `pulumi up` puts on the nodes."""
    from infra import keys

    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    return keys.write_ed25519_keypair(tmp_path / "user" / ".ssh" / "id_ed25519", "user@laptop")


def test_a_stack_made_by_pulumi_up_is_adopted_then_brought_down(
        google: FakeGoogleServer, cli: Path, project: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, user_key: str) -> None:
    from bootstrap.plan import BootstrapSpec, plan as bootstrap_plan
    from infra import realizers
    from infra.stack_home import recorded_provider
    from trainctl.launch import LaunchSpec, plan as launch_plan

    spec = load_stack("gpu-t4x2")
    for i in range(2):
        google.state.instances[(spec.project, spec.zone, f"{spec.name}-w{i}")] = {"labels": {}}
        google.state.instance_guest_attributes[(spec.project, spec.zone, f"{spec.name}-w{i}")] = [ED]
    set_outputs(tmp_path, monkeypatch, {**vm_outputs(spec),
                                        "ssh_public_key": {"value": user_key, "secret": False}})
    pulumi_up_by_hand(cli, project, spec.name)

    inventory = realizers.inventory(spec.name)  # bootstrap, launch, status all start here

    assert recorded_provider(spec.name) == "gcp"
    assert inventory.ssh_private_key == str(tmp_path / "user" / ".ssh" / "id_ed25519")
    assert [n.host_keys for n in inventory.nodes] == [(f"ssh-ed25519 {ED['value']}",)] * 2
    assert Path(inventory.known_hosts).read_text().splitlines()[0] == f"34.1.1.2 ssh-ed25519 {ED['value']}"
    assert not any(c["argv"][0] == "up" for c in calls(cli)[2:])  # adopting creates nothing
    # the layers above take the adopted inventory as they take one from `trainctl up`
    # (their plans list the tree with rsync, which the stand-in-only PATH hides)
    monkeypatch.setenv("PATH", f"{os.environ['PATH']}:/usr/local/bin:/usr/bin:/bin")
    nodes = bootstrap_plan(inventory, BootstrapSpec(code_dir=str(project), setup=("true",)))
    assert len(nodes) == 2 and all(n.steps for n in nodes)
    commands = launch_plan(inventory, LaunchSpec(run_id="r1", command=("python", "t.py")))
    assert len(commands) == 2 and all("torchrun" in c for c in commands.values())

    assert realizers.for_stack(spec.name).down(spec.name, force=False, progress=lambda _l: None)
    assert command(cli, "destroy")
    assert (project / "stacks" / f"Pulumi.{spec.name}.yaml").is_file()
    assert recorded_provider(spec.name) is None


def test_adopting_needs_the_private_half_of_the_key_the_nodes_admit(
        google: FakeGoogleServer, cli: Path, project: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, user_key: str) -> None:
    from infra.stack_home import recorded_provider

    spec = load_stack("gpu-t4x2")
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherKeyOfSomeoneElse0000000000000000 ci@elsewhere"
    set_outputs(tmp_path, monkeypatch, {**vm_outputs(spec), "ssh_public_key": {"value": other, "secret": False}})
    pulumi_up_by_hand(cli, project, spec.name)
    with pytest.raises(ConfigError, match=r"admits the SSH key ssh-ed25519 …000000000000, whose private half"):
        realizer.inventory(spec.name)
    assert recorded_provider(spec.name) is None  # nothing adopted: no state written


def test_a_stack_pulumi_never_made_is_not_up(google: FakeGoogleServer, cli: Path, project: Path) -> None:
    with pytest.raises(ConfigError, match="stack 'gpu-t4x2' is not up: run `trainctl up --stack gpu-t4x2`"):
        realizer.inventory("gpu-t4x2")
    assert not any(c["argv"][:2] == ["stack", "init"] for c in calls(cli))  # nothing created


def test_down_force_sweeps_what_a_failed_destroy_left(
        google: FakeGoogleServer, cli: Path, project: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_stack("gpu-t4x2")
    ours = {"managed-by": "trainctl", "trainctl-stack": spec.name, "trainctl-expires": "9999999999"}
    for i in range(2):
        google.state.instances[(spec.project, spec.zone, f"{spec.name}-w{i}")] = {"labels": ours}
        google.state.instance_guest_attributes[(spec.project, spec.zone, f"{spec.name}-w{i}")] = [ED]
    other = (spec.project, spec.zone, "someone-elses-vm")
    google.state.instances[other] = {"labels": {**ours, "trainctl-stack": "another-stack"}}
    region = spec.zone.rsplit("-", 1)[0]
    network = {(spec.project, "global", "firewalls", f"{spec.name}-fw-internal"),
               (spec.project, "global", "networks", f"{spec.name}-vpc"),
               (spec.project, region, "routers", f"{spec.name}-router"),
               (spec.project, region, "subnetworks", f"{spec.name}-subnet")}  # no SSH rule was made
    theirs = (spec.project, "global", "networks", "another-stack-vpc")
    google.state.network_resources |= network | {theirs}
    google.state.in_use[(spec.project, region, "subnetworks", f"{spec.name}-subnet")] = 1  # VMs still going
    monkeypatch.setattr("infra.gcp.leftovers.IN_USE_POLL_SECONDS", 0.01)
    set_outputs(tmp_path, monkeypatch, vm_outputs(spec))
    realizer.up(spec, lambda _line: None)
    monkeypatch.setenv("FAKE_PULUMI_FAIL", "destroy")

    with pytest.raises(Exception, match="destroy failed"):
        realizer.down(spec.name, force=False, progress=lambda _l: None)
    said: list[str] = []
    assert realizer.down(spec.name, force=True, progress=said.append)

    assert list(google.state.instances) == [other]  # the stack's VMs went, nothing else
    assert google.state.network_resources == {theirs}  # its network by its names, after the VMs
    assert any("deleting what carries the stack's label" in line for line in said)
    assert any(f"subnetwork {spec.name}-subnet is still in use" in line for line in said)
    assert f"deleted network {spec.name}-vpc" in said
    assert any("gcloud artifacts repositories delete" in line for line in said)  # no client here: named
    rm = [c for c in calls(cli) if c["argv"][:2] == ["stack", "rm"]][-1]
    assert "--force" in rm["argv"] and "--preserve-config" in rm["argv"]


# --- spot recovery on GCP: repair through the compute/TPU clients and `pulumi up --refresh` --

NEW = {"namespace": "hostkeys", "key": "ssh-ed25519", "value": "AAAAC3NzaC1lZDI1NTE5AAAAINewHostKey"}


def set_resources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resources: list[dict[str, Any]]) -> None:
    path = tmp_path / "resources.json"
    path.write_text(json.dumps(resources))
    monkeypatch.setenv("FAKE_PULUMI_RESOURCES", str(path))


def test_repair_starts_a_stopped_vm_and_recreates_a_deleted_one_with_a_new_pinned_key(
        google: FakeGoogleServer, cli: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_stack("gpu-l4-spot", name="spot-test")
    w0, w1 = (f"{spec.name}-w{i}" for i in range(2))
    for name in (w0, w1):
        google.state.instances[(spec.project, spec.zone, name)] = {"labels": {}}
        google.state.instance_guest_attributes[(spec.project, spec.zone, name)] = [ED]
    set_outputs(tmp_path, monkeypatch, vm_outputs(spec))
    zone_path = f"/compute/v1/projects/{spec.project}/zones/{spec.zone}/instances"
    set_resources(tmp_path, monkeypatch, [{"get": f"{zone_path}/{name}", "create": zone_path,
                                           "body": {"name": name, "labels": {}}} for name in (w0, w1)])
    realizer.up(spec, lambda _line: None)

    # GCE reclaims both spot VMs: w0 is stopped (STOP), w1 deleted (DELETE) and comes back on
    # a new disk, whose guest agent publishes a new host key.
    google.state.instances[(spec.project, spec.zone, w0)]["status"] = "TERMINATED"
    del google.state.instances[(spec.project, spec.zone, w1)]
    google.state.instance_guest_attributes[(spec.project, spec.zone, w1)] = [NEW]
    assert realizer.instance_status(spec.name, [w0, w1]) == {w0: "TERMINATED", w1: None}

    said: list[str] = []
    repaired = realizer.repair(spec.name, [w0, w1], said.append)

    starts = [c for c in google.state.calls if c.method == "POST" and c.path.endswith(f"/instances/{w0}/start")]
    assert len(starts) == 1  # the stopped VM is started on its disk, not recreated
    inserts = [c for c in google.state.calls if c.method == "POST" and c.path == zone_path]
    assert [c.body["name"] for c in inserts if c.body] == [w1]  # only the deleted one
    up_calls = [c for c in calls(cli) if c["argv"][0] == "up"]
    assert "--refresh" in up_calls[-1]["argv"] and "--policy-pack" in up_calls[-1]["argv"]
    assert json.loads(up_calls[-1]["env"][realizer.SPEC_ENV])["name"] == spec.name
    keys_ = {n.name: n.host_keys for n in repaired.nodes}
    assert keys_ == {w0: (f"ssh-ed25519 {ED['value']}",), w1: (f"ssh-ed25519 {NEW['value']}",)}
    assert f"34.1.1.3 ssh-ed25519 {NEW['value']}" in Path(repaired.known_hosts).read_text()
    assert realizer.instance_status(spec.name, [w0, w1]) == {w0: "RUNNING", w1: "RUNNING"}
    assert any("starting it again on its disk" in line for line in said)


def test_repair_of_a_preempted_tpu_deletes_it_and_creates_it_again(
        google: FakeGoogleServer, cli: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_stack("tpu-v5e-8", name="tpu-spot")
    node = f"projects/{spec.project}/locations/{spec.zone}/nodes/tpu-spot-tpu"
    google.state.tpu_nodes[node] = {"state": "READY"}
    google.state.tpu_guest_attributes[node] = [[ED]]
    nodes = [{"name": "tpu-spot-tpu-w0", "rank": 0, "role": "tpu-worker", "internal_ip": "10.0.0.2",
              "ssh_host": "34.2.2.2", "ssh_user": spec.ssh.user, "accelerator": str(spec.accelerator),
              "workdir": "/home/trainctl/trainctl", "tpu_name": "tpu-spot-tpu"}]
    set_outputs(tmp_path, monkeypatch, {"inventory": {"value": {"nodes": nodes, "bucket_uri": "gs://b"},
                                                      "secret": False}})
    parent = f"/v2/projects/{spec.project}/locations/{spec.zone}/nodes"
    set_resources(tmp_path, monkeypatch, [{"get": f"/v2/{node}", "create": f"{parent}?nodeId=tpu-spot-tpu",
                                           "body": {"acceleratorType": "v5litepod-8"}}])
    realizer.up(spec, lambda _line: None)

    google.state.tpu_nodes[node]["state"] = "PREEMPTED"  # a preempted TPU VM cannot be started
    google.state.tpu_guest_attributes[node] = [[NEW]]
    assert realizer.instance_status(spec.name, ["tpu-spot-tpu-w0"]) == {"tpu-spot-tpu-w0": "TERMINATED"}
    repaired = realizer.repair(spec.name, ["tpu-spot-tpu-w0"], lambda _line: None)

    methods = [(c.method, c.path) for c in google.state.calls]
    assert ("DELETE", f"/v2/{node}") in methods and ("POST", parent) in methods
    assert methods.index(("DELETE", f"/v2/{node}")) < methods.index(("POST", parent))
    assert repaired.nodes[0].host_keys == (f"ssh-ed25519 {NEW['value']}",)
    assert google.state.tpu_nodes[node]["state"] == "READY"


def test_a_zone_without_capacity_is_a_capacity_error_the_launcher_waits_out(
        google: FakeGoogleServer, cli: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from infra.errors import CapacityUnavailable

    spec = load_stack("gpu-l4-spot", name="spot-short")
    for i in range(2):
        google.state.instances[(spec.project, spec.zone, f"{spec.name}-w{i}")] = {"labels": {}}
        google.state.instance_guest_attributes[(spec.project, spec.zone, f"{spec.name}-w{i}")] = [ED]
    set_outputs(tmp_path, monkeypatch, vm_outputs(spec))
    realizer.up(spec, lambda _line: None)
    del google.state.instances[(spec.project, spec.zone, f"{spec.name}-w1")]
    # what pulumi prints when GCE has no spot capacity for the instance it recreates
    monkeypatch.setenv("FAKE_PULUMI_FAIL", "up")
    monkeypatch.setenv("FAKE_PULUMI_FAIL_MESSAGE", "googleapi: Error 503: The zone 'projects/p/zones/"
                       f"{spec.zone}' does not have enough resources available to fulfill the request. "
                       "Try a different zone, or try again later., ZONE_RESOURCE_POOL_EXHAUSTED")
    with pytest.raises(CapacityUnavailable, match="ZONE_RESOURCE_POOL_EXHAUSTED"):
        realizer.repair(spec.name, [f"{spec.name}-w1"], lambda _line: None)
    monkeypatch.setenv("FAKE_PULUMI_FAIL_MESSAGE", "googleapi: Error 400: Invalid value for field 'resource.machineType'")
    with pytest.raises(Exception) as other:
        realizer.repair(spec.name, [f"{spec.name}-w1"], lambda _line: None)
    assert not isinstance(other.value, CapacityUnavailable)  # not every failure is worth waiting for


def test_gke_stacks_are_repaired_by_their_node_pool(google: FakeGoogleServer, cli: Path) -> None:
    with pytest.raises(ConfigError, match="node pool replaces preempted nodes"):
        realizer.repair("gke-l4", ["n0"], lambda _line: None)
