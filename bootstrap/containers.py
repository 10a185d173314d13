"""Containers on a node: the runtime (podman), where the node keeps its images, and the exact
`podman` command lines bootstrap and launch run there.

Every node keeps its own image store under its workdir (private, like its home): a node
recreated after a preemption pulls again, as a new VM would. The same command lines serve the
local stack and GCE/TPU VMs; what differs per machine (its resource limits, whether podman or
the NVIDIA toolkit must be installed) is found out on the node itself.
"""

from __future__ import annotations

import shlex

from bootstrap.ssh import join
from infra.providers.inventory import Node, Registry


def _dir(node: Node) -> str:
    return f"{node.workdir.rstrip('/')}/.trainctl/containers"


def container_env(node: Node) -> dict[str, str]:
    """Points podman at the node's own configuration and image store."""
    return {"CONTAINERS_CONF": f"{_dir(node)}/containers.conf",
            "CONTAINERS_STORAGE_CONF": f"{_dir(node)}/storage.conf"}


def runtime_command(node: Node) -> str:
    """podman present and configured on the node. Containers get the node's own resource limits:
    podman's defaults for root (a million open files and processes) are more than a process
    without CAP_SYS_RESOURCE may grant, as on the local stack's nodes; runc refuses an NPROC
    above pid_max. runc drives the cgroups, v1 or v2, whichever the machine mounts."""
    d = _dir(node)
    # runroot: per user (a non-root SSH user runs rootless podman), cleared with /tmp at boot
    storage = (f'[storage]\ndriver = "overlay"\ngraphroot = "{d}/storage"\n'
               'runroot = "/tmp/trainctl-containers-%s"\n')
    conf = ('[containers]\n'
            'default_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n'
            '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n')
    as_root = 'if [ "$(id -u)" = 0 ]; then AS_ROOT=""; else AS_ROOT="sudo -n"; fi'
    install = ("{ command -v podman >/dev/null && command -v runc >/dev/null || { "
               "$AS_ROOT apt-get update -qq && $AS_ROOT env DEBIAN_FRONTEND=noninteractive "
               "apt-get install -y -qq podman runc catatonit >/dev/null; }; }")
    nproc = ('{ NPROC=$(ulimit -Hu); PID_MAX=$(cat /proc/sys/kernel/pid_max); '
             'if [ "$NPROC" = unlimited ] || [ "$NPROC" -gt "$PID_MAX" ]; then NPROC=$PID_MAX; fi; }')
    lines = [as_root, install, nproc, f"mkdir -p {shlex.quote(d)}",
             f"printf {shlex.quote(storage)} \"$(id -u)\" > {shlex.quote(d + '/storage.conf')}",
             # the limits are the node's, read there
             f'printf {shlex.quote(conf)} "$(ulimit -Hn)" "$(ulimit -Hn)" "$NPROC" "$NPROC" '
             f"> {shlex.quote(d + '/containers.conf')}"]
    if node.accelerator.kind == "gpu":
        # The NVIDIA Container Toolkit's CDI spec names the GPUs for `--device nvidia.com/gpu=all`;
        # Deep Learning VM images ship the toolkit.
        lines.append("command -v nvidia-ctk >/dev/null || { echo 'the NVIDIA Container Toolkit "
                     "(nvidia-ctk) is not installed on this GPU node: use a Deep Learning VM image, "
                     "or install nvidia-container-toolkit' >&2; exit 6; }")
        lines.append("{ [ -f /etc/cdi/nvidia.yaml ] || $AS_ROOT nvidia-ctk cdi generate "
                     "--output=/etc/cdi/nvidia.yaml >/dev/null; }")
    return " && ".join(lines)


def cert_args(registry: Registry | None) -> list[str]:
    return ["--cert-dir", registry.cert_dir] if registry and registry.cert_dir else []


TOKEN_URL = "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"


def pull_command(image: str, registry: Registry | None) -> str:
    pull = join(["podman", "pull", "-q", *cert_args(registry), image]) + " >/dev/null"
    if registry is None or not registry.metadata_token:
        return pull
    token = (f"curl -sSf -H 'Metadata-Flavor: Google' {TOKEN_URL} | "
             "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"access_token\"])'")
    # the token goes through a pipe, never an argument that `ps` would show
    # the image's own registry: an Artifact Registry image may live outside the stack's repository
    return (f"{token} | podman login -u oauth2accesstoken --password-stdin "
            f"{shlex.quote(image.split('/', 1)[0])} >/dev/null && {pull}")


def run_argv(node: Node, image: str, env_names: list[str], mounts: list[str], argv: list[str]) -> list[str]:
    """The program in the image, as on the node itself: the node's network (addresses, ports and
    the metadata server as they are), its IPC (shared memory between local ranks), an init that
    passes signals on (SIGTERM for a checkpoint), the job's environment by name; the image's own
    working directory (trainctl's images: the code). The program replaces the image's ENTRYPOINT,
    as a Vertex containerSpec's command does (a job without one runs the ENTRYPOINT by name)."""
    args = ["podman", "run", "--rm", "--init", "--network", "host", "--ipc", "host"]
    for name in env_names:
        args += ["--env", name]  # the value comes from podman's own environment
    for path in mounts:
        args += ["--volume", f"{path}:{path}"]
    if node.accelerator.kind == "gpu":
        args += ["--device", "nvidia.com/gpu=all"]
    elif node.accelerator.kind == "tpu":
        # Google's TPU VM guide runs training containers privileged, on the host network.
        args += ["--privileged"]
    return [*args, "--entrypoint", argv[0], image, *argv[1:]]
