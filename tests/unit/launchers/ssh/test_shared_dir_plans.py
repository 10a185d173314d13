"""`shared_dir:` as each node's command makes it, per target: the exact mount (a host folder on
the local stack; the run's bucket folder through Cloud Storage FUSE on GCP VMs and TPU VMs), the
links from the working directory, what the program is told; and the stacks that cannot share a
folder, refused before anything exists. The local stack's links run here in a real shell."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from infra.errors import ConfigError
from infra.providers.inventory import Inventory
from infra.providers.protocol import Capabilities
from trainctl.launchers.shared_dir import (INSTALL_GCSFUSE, SharedDir, link_commands, mount_command, preamble,
                                           refuse_unshareable)
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import node_command, plan as launch_plan

from tests.unit.launchers.ssh.test_plans import inventory

TUTORIAL = SharedDir(links=("snapshot.pt",))
LINK = ("{ [ ! -e snapshot.pt ] || [ -L snapshot.pt ] || { echo 'trainctl: shared_dir: snapshot.pt is a file of "
        "the working directory, not a link; move it away' >&2; exit 1; }; } && ln -sfn {folder}/snapshot.pt snapshot.pt")


def local() -> Inventory:
    return inventory(3, shared_root="/state/s/shared")


def gcp() -> Inventory:
    return inventory(3).model_copy(update={"provider": "gcp"})


def test_on_the_local_stack_every_node_gets_the_same_host_folder_and_the_link():
    inv = local()
    for node in inv.nodes:
        assert preamble(inv, node, "r-1", TUTORIAL) == (
            "mkdir -p /state/s/shared/r-1 && " + LINK.replace("{folder}", "/state/s/shared/r-1") + " && ")


def test_on_gcp_each_node_mounts_the_runs_bucket_folder_with_cloud_storage_fuse_once():
    inv = gcp()
    node = inv.nodes[1]
    folder = "/w/node1/shared/r-1"
    assert mount_command(inv, node, "r-1") == (
        f"mkdir -p {folder} && {{ mountpoint -q {folder} || {{ {INSTALL_GCSFUSE} && "
        "gcsfuse --implicit-dirs --only-dir r-1/shared --metadata-cache-ttl-secs 0 "
        "--metadata-cache-negative-ttl-secs 0 --uid $(id -u) --gid $(id -g) "
        f"--log-file {folder}.gcsfuse.log bkt {folder}; }} || "
        f"{{ echo 'trainctl: shared_dir: gs://bkt/r-1/shared could not be mounted at {folder} with Cloud Storage "
        f"FUSE; see {folder}.gcsfuse.log' >&2; exit 1; }}; }}")
    assert preamble(inv, node, "r-1", TUTORIAL).endswith(LINK.replace("{folder}", folder) + " && ")
    # Google's apt repository, only where the image has no gcsfuse, as root or through sudo
    assert INSTALL_GCSFUSE.startswith("{ command -v gcsfuse >/dev/null || ")
    assert "https://packages.cloud.google.com/apt gcsfuse-$(lsb_release -c -s) main" in INSTALL_GCSFUSE
    assert "apt-get install -y -qq gcsfuse" in INSTALL_GCSFUSE


def test_the_program_is_told_where_the_folder_is_and_runs_after_it_is_made():
    inv = local()
    spec = LaunchSpec(run_id="r-1", command=("python", "train.py", "--ckpt", "{shared_dir}/ckpt"), shared_dir=TUTORIAL)
    command = node_command(inv, inv.nodes[2], spec)
    assert command.index("mkdir -p /state/s/shared/r-1") < command.index("ln -sfn") < command.index("exec ")
    assert command.index("cd /w/node2/code") < command.index("ln -sfn")  # links in the working directory
    words = shlex.split(command[command.index("exec "):])
    assert words[-3:] == ["train.py", "--ckpt", "/state/s/shared/r-1/ckpt"]
    assert "TRAINCTL_SHARED_DIR=/state/s/shared/r-1" in shlex.split(command)
    plain = node_command(inv, inv.nodes[2], LaunchSpec(run_id="r-1", command=("python", "train.py")))
    assert "shared" not in plain and "TRAINCTL_SHARED_DIR" not in plain


def test_links_run_in_a_shell_point_into_the_folder_and_a_real_file_is_refused(tmp_path: Path):
    work, folder = tmp_path / "work", tmp_path / "shared"
    work.mkdir()
    folder.mkdir()
    links = ("snapshot.pt", "ckpt/", "sub/last.pt")
    script = " && ".join(link_commands(str(folder), links))
    for _ in range(2):  # a rerun finds its links and makes them again
        subprocess.run(["sh", "-c", script], cwd=work, check=True)
    assert not (work / "snapshot.pt").exists() and (work / "snapshot.pt").is_symlink()  # no snapshot yet
    (work / "snapshot.pt").write_bytes(b"epoch 3")  # what rank 0 writes lands in the folder
    (work / "ckpt" / "a").write_bytes(b"a")
    (work / "sub" / "last.pt").write_bytes(b"b")
    assert [(folder / p).read_bytes() for p in ("snapshot.pt", "ckpt/a", "sub/last.pt")] == [b"epoch 3", b"a", b"b"]
    (work / "snapshot.pt").unlink()
    (work / "snapshot.pt").write_bytes(b"the program's own")
    done = subprocess.run(["sh", "-c", script], cwd=work, capture_output=True, text=True)
    assert done.returncode == 1
    assert "shared_dir: snapshot.pt is a file of the working directory, not a link" in done.stderr
    assert (work / "snapshot.pt").read_bytes() == b"the program's own"


@pytest.mark.parametrize("link", ["/abs.pt", "../up.pt", "a/../../b", ".", " "])
def test_links_outside_the_working_directory_are_refused(link: str):
    with pytest.raises(ValueError, match="must be a relative path inside the program's working directory"):
        SharedDir(links=(link,))


def capabilities(**fields) -> Capabilities:
    return Capabilities(**{"target": "ssh", "needs_bootstrap": True, "repair_keeps_addresses": False,
                           "reaches_google": True, "machine_types": True, **fields})


def test_stacks_whose_nodes_cannot_share_a_folder_are_refused_naming_the_way_that_works():
    refuse_unshareable("local", capabilities(shared_folder="host"))
    refuse_unshareable("gpu", capabilities(shared_folder="bucket"))
    with pytest.raises(ConfigError, match=r"runs the job as GKE pods.*cloud-storage-fuse-csi-driver.*\{job_dir\}"):
        refuse_unshareable("gke-l4", capabilities(target="gke", needs_bootstrap=False))
    with pytest.raises(ConfigError, match=r"no route to Google's Cloud Storage.*simulated project.*use the local stack"):
        refuse_unshareable("sim", capabilities())


def test_each_target_says_how_its_nodes_share_a_folder():
    from infra.providers import realizers
    from infra.providers.gcp import private_endpoints
    from infra.spec.stack_config import load_stack

    shared = {name: realizers.capabilities(load_stack(name)).shared_folder
              for name in ("local", "gpu-t4x2", "tpu-v5e-16", "gke-l4")}
    assert shared == {"local": "host", "gpu-t4x2": "bucket", "tpu-v5e-16": "bucket", "gke-l4": None}
    # A simulated project's machines, as its endpoints record describes them: no route off this machine.
    private_endpoints.use(private_endpoints.PrivateEndpoints(
        api="http://127.0.0.1:9", machines=private_endpoints.Machines(route_to_internet=False, on_this_host=True)))
    assert realizers.capabilities(load_stack("gpu-t4x2")).shared_folder is None


def test_every_worker_of_a_tpu_slice_mounts_the_same_bucket_folder_before_its_program():
    from tests.unit.launchers.ssh.test_tpu_launch_plan import tpu_inventory

    inv = tpu_inventory("v5litepod-16", 4)
    commands = launch_plan(inv, LaunchSpec(run_id="r-1", command=("python", "train.py"), shared_dir=TUTORIAL))
    for node in inv.nodes:
        folder = f"/w/{node.rank}/shared/r-1"
        command = commands[node.name]
        assert mount_command(inv, node, "r-1") in command
        assert "--only-dir r-1/shared" in command and f" bkt {folder};" in command  # one bucket folder for all
        assert command.index(f"ln -sfn {folder}/snapshot.pt snapshot.pt") < command.index("exec ")
