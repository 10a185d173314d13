"""`shared_dir:`: one folder for the run that every node reads and writes at the same moment, for
programs that keep their checkpoint in a plain file (PyTorch's DDP tutorial saves `snapshot.pt`
in its working directory from rank 0 only and reads it on every rank when it starts).

Where the folder is, by what the stack's nodes are:
- nodes that see one machine's files (the local stack's namespaces share the host's tree but
  /root, /tmp, /run and /var/log): a folder of the stack's state on the host, the same path on
  every node (`Inventory.shared_root`);
- GCP VMs and TPU VMs: the run's folder in the stack's bucket, `gs://<bucket>/<run-id>/shared`,
  mounted with Cloud Storage FUSE on every node (installed from Google's apt repository where the
  image lacks it); it outlives the nodes, so a recreated spot node reads what the others wrote;
- anything else (GKE pods, a simulated project's machines, which reach no Google storage and have
  no gcsfuse) is refused before anything is created: refuse_unshareable.

`links` are paths in the program's working directory made symbolic links into the folder before
the program starts, so an unchanged script that writes a relative file writes it there. The
program also finds the folder in TRAINCTL_SHARED_DIR and as `{shared_dir}` in its command.
"""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, field_validator

from infra.errors import ConfigError
from infra.providers.inventory import Inventory, Node
from infra.providers.protocol import Capabilities

SHARED_DIR_ENV = "TRAINCTL_SHARED_DIR"
SHARED_PREFIX = "shared"  # gs://<bucket>/<run-id>/shared: beside the job dir's model/, checkpoints/


class SharedDir(BaseModel):
    """One folder for the run that every node sees (see `shared_dir.*`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    links: tuple[str, ...] = ()
    """Paths in the program's working directory (a file, or a folder ending in '/') made links
    into the shared folder on every node before the program starts: `[snapshot.pt]` for PyTorch's
    DDP tutorial, which saves its snapshot there from rank 0 and reads it on every rank."""

    @field_validator("links")
    @classmethod
    def relative(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for link in v:
            path = PurePosixPath(link)
            if path.is_absolute() or ".." in path.parts or not link.strip() or str(path) == ".":
                raise ValueError(f"shared_dir.links {link!r} must be a relative path inside the program's "
                                 "working directory (no leading '/', no '..', not the folder itself)")
        return v


def node_folder(inventory: Inventory, node: Node, run_id: str) -> str:
    """The shared folder's path on `node`."""
    if inventory.shared_root:
        return f"{inventory.shared_root.rstrip('/')}/{run_id}"
    return f"{node.workdir.rstrip('/')}/shared/{run_id}"


def bucket_folder(inventory: Inventory, run_id: str) -> str:
    return f"{inventory.bucket_uri.rstrip('/')}/{run_id}/{SHARED_PREFIX}"


# Google's apt repository for Cloud Storage FUSE, as GoogleCloudPlatform/gcsfuse docs/installing.md
# sets it up ("gcsfuse-`lsb_release -c -s`" at packages.cloud.google.com/apt, its key from
# packages.cloud.google.com/apt/doc/apt-key.gpg), with the key in a keyring file that the source
# names (signed-by): apt-key is gone from Debian 12 and Ubuntu 24.04.
INSTALL_GCSFUSE = (
    "{ command -v gcsfuse >/dev/null || { S=$( [ \"$(id -u)\" = 0 ] || echo 'sudo -n' ); "
    "curl -fsS https://packages.cloud.google.com/apt/doc/apt-key.gpg | $S tee /usr/share/keyrings/cloud.google.asc >/dev/null"
    " && echo \"deb [signed-by=/usr/share/keyrings/cloud.google.asc] https://packages.cloud.google.com/apt "
    "gcsfuse-$(lsb_release -c -s) main\" | $S tee /etc/apt/sources.list.d/gcsfuse.list >/dev/null"
    " && $S apt-get update -qq && $S env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcsfuse >/dev/null; }; }")


def gcsfuse_argv(inventory: Inventory, run_id: str, folder: str) -> list[str]:
    """The mount, as the node's user (the program's), so its files are the program's own.
    Flags (GoogleCloudPlatform/gcsfuse cfg/params.yaml): `--only-dir` mounts one folder of the
    bucket; `--implicit-dirs` shows folders that exist only as object-name prefixes (a link
    `ckpt/` whose objects another node wrote); `--metadata-cache-ttl-secs 0` and
    `--metadata-cache-negative-ttl-secs 0` turn the stat caches off (defaults 60 s and 5 s), so a
    rank that restarts sees the snapshot another node's rank wrote a moment ago, not a cached
    "no such file"; `--uid`/`--gid` (default -1: the mounting process's) said outright;
    `--log-file` keeps gcsfuse's log beside the run's (without it, syslog)."""
    bucket = inventory.bucket_uri.removeprefix("gs://").strip("/")
    return ["gcsfuse", "--implicit-dirs", "--only-dir", f"{run_id}/{SHARED_PREFIX}",
            "--metadata-cache-ttl-secs", "0", "--metadata-cache-negative-ttl-secs", "0",
            "--uid", "$(id -u)", "--gid", "$(id -g)", "--log-file", f"{folder}.gcsfuse.log", bucket, folder]


def _shell(argv: list[str]) -> str:
    # $(id -u) stays a substitution; everything else is quoted
    return " ".join(a if a.startswith("$(") else shlex.quote(a) for a in argv)


def mount_command(inventory: Inventory, node: Node, run_id: str) -> str:
    """Make the folder on the node: a host folder, or the bucket's folder mounted (once: a
    rerun finds it mounted). Fails with a line naming what could not be mounted."""
    folder = node_folder(inventory, node, run_id)
    q = shlex.quote(folder)
    if inventory.shared_root:
        return f"mkdir -p {q}"
    failed = (f"echo {shlex.quote(f'trainctl: shared_dir: {bucket_folder(inventory, run_id)} could not be mounted at {folder} with Cloud Storage FUSE; see {folder}.gcsfuse.log')} >&2; exit 1")
    return (f"mkdir -p {q} && {{ mountpoint -q {q} || {{ {INSTALL_GCSFUSE} && "
            f"{_shell(gcsfuse_argv(inventory, run_id, folder))}; }} || {{ {failed}; }}; }}")


def link_commands(folder: str, links: tuple[str, ...]) -> list[str]:
    """Each link in the working directory (the current one) into `folder`. A real file or folder
    already there is the program's own: refused, not replaced."""
    commands = []
    for link in links:
        path = link.rstrip("/")
        q, target = shlex.quote(path), shlex.quote(f"{folder}/{path}")
        parent = str(PurePosixPath(path).parent)
        made = [f"mkdir -p {shlex.quote(parent)}"] if parent != "." else []
        if link.endswith("/"):
            made.append(f"mkdir -p {target}")
        elif parent != ".":
            made.append(f"mkdir -p {shlex.quote(f'{folder}/{parent}')}")
        taken = f"trainctl: shared_dir: {path} is a file of the working directory, not a link; move it away"
        commands.append(f"{{ [ ! -e {q} ] || [ -L {q} ] || {{ echo {shlex.quote(taken)} >&2; exit 1; }}; }}")
        commands.extend(made)
        commands.append(f"ln -sfn {target} {q}")
    return commands


def preamble(inventory: Inventory, node: Node, run_id: str, shared: SharedDir | None) -> str:
    """What the node runs in the program's working directory before the program, '' without
    `shared_dir`; ends with ' && '."""
    if shared is None:
        return ""
    folder = node_folder(inventory, node, run_id)
    return " && ".join([mount_command(inventory, node, run_id), *link_commands(folder, shared.links)]) + " && "


def refuse_unshareable(stack: str, can: Capabilities) -> None:
    """Bad input, before anything is created (exit 2): a stack whose nodes cannot share a folder."""
    if can.shared_folder is not None:
        return
    if not can.needs_bootstrap:  # Kubernetes pods of an image, not nodes trainctl prepares
        raise ConfigError(f"shared_dir: stack {stack} runs the job as GKE pods; trainctl does not mount "
                          "a shared folder into them (the Cloud Storage FUSE CSI driver would: "
                          "https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-ephemeral"
                          "); write checkpoints to the job dir ({job_dir}, a gs:// path) through fsspec/gcsfs")
    raise ConfigError(f"shared_dir: the nodes of stack {stack} have no route to Google's Cloud Storage (its "
                      "endpoints record says so: a simulated project's machines), so Cloud Storage FUSE can be "
                      "neither installed nor mount the run's bucket folder there, and they share no folder "
                      "of one machine; write checkpoints to the job dir ({job_dir}) through fsspec/gcsfs, "
                      "or use the local stack")
