"""What bootstrap does on each node, as data: the exact commands, before anything runs.

Steps, in order, each idempotent: a fingerprint of its inputs is stored on the node after it
succeeds, and a step whose fingerprint is unchanged is skipped in the same round trip.
  ready    SSH answers, the VM's own startup has finished, the accelerator is visible
  drivers  GPU nodes without a working nvidia-smi get the NVIDIA driver; others skip
  gpunet   VMs of a GPUDirect family: the NCCL plugin for their GPU NICs (for A3 Mega first
           the dmabuf import helper module and /dev/aperture_devices; bootstrap/gpunet.py)
  sync     rsync of the code (from the controller), honouring .gitignore, deleting stale files
  env      a uv virtual environment with the project's requirements (before sync when there
           are none: it then needs nothing from the code)
  setup    the user's setup commands, with the node's rank and the node list in the environment
On a node this controller never synced, the rsync starts at once, alongside `ready`.

With an image (the code and its environment built into it), sync, env and setup give way to
  runtime  podman present and configured for the node (bootstrap/containers.py)
  pull     the image, by digest, into the node's own store
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from bootstrap import containers
from bootstrap.cpu_torch import install_env
from bootstrap.gpunet import gpunet_command
from bootstrap.shared_env import link_command, shares_the_seed
from bootstrap.ssh import join, openssh_command, shell_env
from bootstrap.treesync import list_tree, unpack_command
from infra.errors import ConfigError
from infra.providers.inventory import Inventory, Node

STEPS = ("ready", "drivers", "gpunet", "sync", "env", "setup", "runtime", "pull")
FP_MARK = "TRAINCTL_FP"
# Google's documented installer for Compute Engine (Ubuntu/Debian/RHEL images); it reboots
# once for the kernel module, so it is rerun until nvidia-smi works.
GPU_DRIVER_INSTALLER = ("https://storage.googleapis.com/compute-gpu-installation-us/"
                        "installer/latest/cuda_installer.pyz")
UV_INSTALLER = "https://astral.sh/uv/install.sh"
DEFAULT_EXCLUDES = (".git/", ".venv/", "__pycache__/", "*.pyc", "runs/", ".pytest_cache/",
                    ".mypy_cache/", ".hypothesis/")


class BootstrapSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    code_dir: Path
    excludes: tuple[str, ...] = ()
    requirements: str | None = None  # relative to code_dir
    # Requirement specifiers installed with the requirements file (trainctl's own additions:
    # run.legacy_keras's tf_keras), resolved together with it.
    packages: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    python: str = "python3"
    force: tuple[str, ...] = ()
    ready_timeout: float = 300.0
    # An image by digest that holds the code and its environment: nodes pull it instead.
    image: str | None = None

    @field_validator("force")
    @classmethod
    def known_steps(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for step in v:
            if step not in STEPS:
                raise ValueError(f"--force {step!r}: unknown step; valid: {', '.join(STEPS)}")
        return v

    @model_validator(mode="after")
    def setup_outside_images(self) -> BootstrapSpec:
        if self.image and self.setup:
            raise ValueError("setup commands prepare the node's uv environment; with an image, "
                             "build what they do into the image instead")
        return self

    @field_validator("requirements")
    @classmethod
    def relative(cls, v: str | None) -> str | None:
        if v is not None and (Path(v).is_absolute() or ".." in Path(v).parts):
            raise ValueError(f"requirements {v!r} must be a path inside the code directory")
        return v


@dataclass(frozen=True)
class Step:
    name: str
    where: Literal["node", "controller"]
    command: str | list[str]  # a shell line on the node, or argv on the controller
    fingerprint: str | None = None  # None: always runs (cheap or self-idempotent)
    note: str = ""
    # What runs instead, and when, where the choice is made at run time (sync: a delta archive
    # for a node whose tree this controller has listed); the plan shows both.
    instead: str = ""


@dataclass(frozen=True)
class NodePlan:
    node: Node
    steps: list[Step] = field(default_factory=list)
    forced: frozenset[str] = frozenset()  # steps that run even when their fingerprint matches


def node_paths(node: Node) -> dict[str, str]:
    w = node.workdir.rstrip("/")
    return {"workdir": w, "code": f"{w}/code", "venv": f"{w}/venv", "state": f"{w}/.trainctl"}


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def record_fingerprint(step: str, node: Node, fingerprint: str) -> str:
    fp_dir = shlex.quote(f"{node_paths(node)['state']}/fp")
    return f"mkdir -p {fp_dir} && echo {fingerprint} > {fp_dir}/{step}"


def delta_sync_command(node: Node, deletions: list[str], fingerprint: str, *, base: str | None = None) -> str:
    """The node's side of a delta sync: unpack the archive on stdin, remove what went, record.
    With `base`, only onto that tree: any other leaves the node untouched (exit BASE_DIFFERS)."""
    apply = f"{unpack_command(node_paths(node)['code'], deletions)} && {record_fingerprint('sync', node, fingerprint)}"
    if base is None:
        return apply
    stored = shlex.quote(f"{node_paths(node)['state']}/fp/sync")
    return f'if [ "$(cat {stored} 2>/dev/null)" != {base} ]; then cat >/dev/null; exit {BASE_DIFFERS}; fi; {apply}'


BASE_DIFFERS = 99


def recorded(step: str, node: Node, fingerprint: str, body: str) -> str:
    """A step body that stores its fingerprint on the node once it succeeded."""
    return f"( {body} ) && {record_fingerprint(step, node, fingerprint)}"


def parse_fingerprints(output: str) -> dict[str, str]:
    """The fingerprints `ready` found on the node: one probe round trip decides every skip."""
    found = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == FP_MARK:
            found[parts[1]] = parts[2]
    return found


def ready_command(node: Node) -> str:
    probe = "nproc >/dev/null"
    if node.accelerator.kind == "gpu":
        # The driver step decides what a missing nvidia-smi means; here only report it.
        probe = "(nvidia-smi -L || echo 'nvidia-smi not working yet')"
    elif node.accelerator.kind == "tpu":
        probe = ("ls /dev/accel* /dev/vfio/* >/dev/null 2>&1 || "
                 "{ echo 'no TPU device (/dev/accel*, /dev/vfio) on this TPU VM' >&2; exit 3; }")
    wait_startup = (
        "if command -v cloud-init >/dev/null 2>&1; then cloud-init status --wait >/dev/null || true; fi; "
        "if command -v systemctl >/dev/null 2>&1 && systemctl list-unit-files "
        "google-startup-scripts.service >/dev/null 2>&1; then "
        "while [ \"$(systemctl is-active google-startup-scripts.service)\" = activating ]; "
        "do sleep 2; done; fi")
    fp_dir = shlex.quote(f"{node_paths(node)['state']}/fp")
    list_fps = (f"for f in {fp_dir}/*; do [ -f \"$f\" ] && "
                f"echo {FP_MARK} \"$(basename \"$f\")\" \"$(cat \"$f\")\"; done; true")
    return f"{wait_startup}; {probe}; mkdir -p {shlex.quote(node.workdir)}; {list_fps}"


# Google's installer may need a reboot between its stages (it is rerun after each); more than
# this many reboots for one installation means it will not work, and asking again would loop.
MAX_DRIVER_REBOOTS = 2


def drivers_command(node: Node) -> tuple[str, str]:
    if node.accelerator.kind != "gpu":
        return "echo 'no GPU on this node: driver not needed'", "not needed"
    # The reboot count lives on the node's disk, so it survives the reboots it counts.
    reboots = shlex.quote(f"{node_paths(node)['state']}/driver-reboots")
    # `cuda_installer.pyz install_driver` asserts it runs as root. The SSH user usually is not
    # root on GCE: use sudo, non-interactively (-n), so a password prompt fails instead of hanging.
    as_root = (
        'if [ "$(id -u)" = 0 ]; then AS_ROOT=""; '
        "elif sudo -n true 2>/dev/null; then AS_ROOT='sudo -n'; else "
        "echo \"the NVIDIA driver installer must run as root, and sudo asks user $(id -un) for a "
        "password: give this user passwordless sudo (GCE does for users added by ssh-keys "
        "metadata or OS Login admin)\" >&2; exit 4; fi")
    # The count is kept after giving up, so later runs fail fast too instead of rebooting again.
    give_up = (f"echo \"NVIDIA driver installed but nvidia-smi still fails after "
               f"{MAX_DRIVER_REBOOTS} reboot(s): see the installer's output above; to try again, "
               f"remove \"{reboots}\" on the node\" >&2; exit 5")
    ask_reboot = (f"n=$(cat {reboots} 2>/dev/null || echo 0); "
                  f"if [ \"$n\" -ge {MAX_DRIVER_REBOOTS} ]; then {give_up}; fi; "
                  f"mkdir -p \"$(dirname {reboots})\" && echo $((n + 1)) > {reboots}; "
                  "echo TRAINCTL_REBOOT_REQUIRED; exit 75")
    install = (
        "if nvidia-smi -L >/dev/null 2>&1; then echo 'NVIDIA driver already working'; else "
        f"{as_root}; "
        f"curl -fsSL {GPU_DRIVER_INSTALLER} -o /tmp/cuda_installer.pyz && "
        "$AS_ROOT python3 /tmp/cuda_installer.pyz install_driver --installation-mode=binary; "
        f"if nvidia-smi -L; then rm -f {reboots}; else {ask_reboot}; fi; fi")
    return install, "install if nvidia-smi fails"


def installs(spec: BootstrapSpec) -> bool:
    """Whether the environment gets anything installed: a requirements file or packages."""
    return bool(spec.requirements or spec.packages)


def install_args(spec: BootstrapSpec) -> list[str]:
    """uv pip install's arguments for the requirements file and the packages, one resolution."""
    return [*(["-r", spec.requirements] if spec.requirements else []), *spec.packages]


def env_command(node: Node, spec: BootstrapSpec) -> str:
    p = node_paths(node)
    venv_python = shlex.quote(f"{p['venv']}/bin/python")
    lines = [
        'UV="$(command -v uv || echo "$HOME/.local/bin/uv")"',
        f'[ -x "$UV" ] || {{ curl -LsSf {UV_INSTALLER} | sh && UV="$HOME/.local/bin/uv"; }}',
        f'[ -x {venv_python} ] || "$UV" venv -q --python {shlex.quote(spec.python)} {shlex.quote(p["venv"])}',
    ]
    if installs(spec):
        # from the code folder: relative paths in the file (a package staged from packageUris,
        # `./libs/x`) mean what they mean on the controller, where uv reads them from its cwd
        lines.append(f'cd {shlex.quote(p["code"])} && "$UV" pip install -q --python {venv_python} '
                     f'{join(install_args(spec))}')
    return " && ".join(lines)


def setup_command(inventory: Inventory, node: Node, spec: BootstrapSpec) -> str:
    p = node_paths(node)
    env = {
        "TRAINCTL_NODE_RANK": str(node.rank),
        "TRAINCTL_NUM_NODES": str(len(inventory.nodes)),
        "TRAINCTL_NODE_IPS": ",".join(n.internal_ip for n in inventory.nodes),
        "VIRTUAL_ENV": p["venv"],
    }
    script = "set -e\n" + "\n".join(spec.setup)
    return (f"cd {shlex.quote(p['code'])} && {shell_env(env)}"
            f"export PATH={shlex.quote(p['venv'] + '/bin')}:$PATH; bash -c {shlex.quote(script)}")


def rsync_argv(inventory: Inventory, node: Node, spec: BootstrapSpec) -> list[str]:
    ssh = join(openssh_command(inventory, node))
    argv = ["rsync", "-a", "--delete", "--delete-excluded", "--mkpath", *filter_args(spec), "-e", ssh]
    src = str(spec.code_dir.resolve()) + "/"
    argv += [src, f"{node.ssh_host}:{node_paths(node)['code']}/"]
    return argv


def tree_listing(spec: BootstrapSpec) -> str:
    """What rsync would send, by rsync's own filter rules: names, sizes, mtimes, modes."""
    return list_tree(spec.code_dir, filter_args(spec))


def tree_digest(spec: BootstrapSpec, listing: str) -> str:
    return _digest("sync", *filter_args(spec), listing)


def filter_args(spec: BootstrapSpec) -> list[str]:
    return ["--filter=:- .gitignore", *(f"--exclude={p}" for p in (*DEFAULT_EXCLUDES, *spec.excludes))]


def requirements_digest(spec: BootstrapSpec, node_env: dict[str, str]) -> str:
    content = ""
    if spec.requirements:
        path = spec.code_dir / spec.requirements
        content = path.read_text() if path.is_file() else ""
    uv_env = ",".join(f"{k}={v}" for k, v in sorted(node_env.items()) if k.startswith("UV_"))
    return _digest("env", spec.python, spec.requirements or "", content, uv_env, *spec.packages)


# What a node's login shell has on PATH (sshd's default): `python3` must mean the same
# interpreter on the controller when it prefetches for offline nodes.
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def seed_dir(node_env: dict[str, str], spec: BootstrapSpec) -> Path:
    """Where the seed environment of these requirements is, beside the uv cache it fills."""
    cache = node_env.get("UV_CACHE_DIR")
    if not cache:
        raise ValueError("offline nodes need UV_CACHE_DIR in the inventory's node_env")
    return Path(cache).parent / "seed" / requirements_digest(spec, node_env)


def seed_argv(node_env: dict[str, str], spec: BootstrapSpec, uv: str) -> tuple[list[str], dict[str, str], Path]:
    """One install on the controller into a seed environment fills the uv cache named in
    `node_env`: offline nodes (and image builds) install from it, so N nodes cost one download
    and no copies."""
    import shutil

    assert installs(spec)
    python = shutil.which(spec.python, path=NODE_PATH) or spec.python
    seed = seed_dir(node_env, spec)
    cache = node_env["UV_CACHE_DIR"]
    env = {k: v for k, v in node_env.items() if k.startswith("UV_") and k != "UV_OFFLINE"}
    quoted = shlex.quote(str(seed))
    # Bytecode compiled once into the cache's unpacked wheels: uv hardlinks their __pycache__
    # into every node's environment with the sources, so no node compiles torch at its first
    # import (about 3 s per process here, paid again by each node recreated after a preemption).
    # A wheel's `.data/` files are moved by uv at install, checked against its RECORD, so
    # nothing may be added there. Some packages ship files that do not compile (templates,
    # other Pythons): not an error.
    compile_cache = (f"{join([str(seed / 'bin' / 'python'), '-m', 'compileall', '-q', '-j', '0', '-x', r'[.]data/', str(Path(cache) / 'archive-v0')])}"
                     " >/dev/null 2>&1")
    script = (f"[ -f {quoted}/.complete ] || {{ "
              f"{join([uv, 'venv', '-q', '--allow-existing', '--python', python, str(seed)])} && "
              f"cd {shlex.quote(str(spec.code_dir))} && "
              f"{join([uv, 'pip', 'install', '-q', '--python', str(seed / 'bin' / 'python'), *install_args(spec)])} && "
              f"touch {quoted}/.complete; }} || exit 1; "
              f"[ -f {quoted}/.compiled ] || {{ {compile_cache}; touch {quoted}/.compiled; }}")
    return ["sh", "-c", script], env, seed


def _first_steps(inventory: Inventory, node: Node) -> list[Step]:
    drivers, drivers_note = drivers_command(node)
    steps = [Step("ready", "node", shell_env(inventory.node_env) + ready_command(node),
                  note="SSH + startup finished + accelerator probe + stored fingerprints"),
             Step("drivers", "node", drivers, note=drivers_note)]
    gpunet = gpunet_command(node)
    if gpunet is not None:
        command, fingerprint = gpunet
        steps.append(Step("gpunet", "node", recorded("gpunet", node, fingerprint, command),
                          fingerprint=fingerprint, note="GPUDirect NCCL plugin for the GPU NICs"))
    return steps


def check_inputs(spec: BootstrapSpec) -> None:
    """What must exist on the controller before anything is sent to a node: bad input (exit 2)."""
    code = spec.code_dir
    if code.exists() and not code.is_dir():
        raise ConfigError(f"--code {code} is a file; give the folder to copy to every node "
                          f"(e.g. --code {code.parent})")
    if not code.is_dir():
        raise ConfigError(f"--code {code} does not exist; give the folder to copy to every node")
    if spec.requirements and not (code / spec.requirements).is_file():
        raise ConfigError(f"--requirements {spec.requirements}: {code / spec.requirements} does not exist "
                          "(the file is looked up inside the --code folder)")


def container_steps(inventory: Inventory, node: Node, image: str) -> list[Step]:
    prefix = shell_env({**inventory.node_env, **containers.container_env(node)})
    runtime = containers.runtime_command(node)
    runtime_fp = _digest("runtime", runtime)
    return [Step("runtime", "node", prefix + recorded("runtime", node, runtime_fp, runtime),
                 fingerprint=runtime_fp, note="podman installed where missing, node's limits"),
            Step("pull", "node",
                 prefix + recorded("pull", node, _digest("pull", image),
                                   containers.pull_command(image, inventory.registry)),
                 fingerprint=_digest("pull", image), note=f"podman pull {image}")]


def plan(inventory: Inventory, spec: BootstrapSpec, nodes: list[Node] | None = None,
         listing: str | None = None) -> list[NodePlan]:
    check_inputs(spec)
    if spec.image:
        return [NodePlan(node, [*_first_steps(inventory, node), *container_steps(inventory, node, spec.image)],
                         forced=frozenset(spec.force))
                for node in nodes or list(inventory.nodes)]
    node_env = install_env(inventory)
    env_fp = requirements_digest(spec, node_env)
    seed = seed_dir(inventory.node_env, spec) if shares_the_seed(inventory, spec) else None
    if seed is not None:  # a node that had an environment of its own gets the link in its place
        env_fp = _digest("shared", env_fp)
    sync_fp = tree_digest(spec, tree_listing(spec) if listing is None else listing)
    # Setup reruns when its commands or the environment change; after a code change only with
    # --force setup (a setup that builds from the code says so explicitly).
    setup_fp = _digest("setup", *spec.setup, env_fp)
    prefix = shell_env(node_env)
    plans = []
    for node in nodes or list(inventory.nodes):
        steps = _first_steps(inventory, node)
        sync = Step("sync", "controller", rsync_argv(inventory, node, spec), fingerprint=sync_fp,
                    note="rsync, only changed files",
                    instead=("if the node holds a tree this controller has a listing of: the changed "
                             "files as one gzip tar, piped over SSH into: "
                             + delta_sync_command(node, ["<removed files>"], sync_fp)))
        if seed is not None:
            env = Step("env", "node", recorded("env", node, env_fp, link_command(node_paths(node)["venv"], seed)),
                       fingerprint=env_fp, note="a link to the controller's seed environment")
        else:
            env = Step("env", "node", prefix + recorded("env", node, env_fp, env_command(node, spec)),
                       fingerprint=env_fp, note="uv venv + requirements")
        # An install reads the requirements from the synced code; without one, the environment
        # is made first, while a fresh node's rsync (started alongside `ready`) is still running.
        steps += [sync, env] if spec.requirements and seed is None else [env, sync]
        if spec.setup:
            steps.append(Step("setup", "node",
                              prefix + recorded("setup", node, setup_fp,
                                                setup_command(inventory, node, spec)),
                              fingerprint=setup_fp, note=f"{len(spec.setup)} command(s)"))
        plans.append(NodePlan(node, steps, forced=frozenset(spec.force)))
    return plans
