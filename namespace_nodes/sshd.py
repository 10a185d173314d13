"""One real OpenSSH sshd per local node, in the node's own mount and PID namespace.

The node gets private /root, /tmp, /run and /var/log, and shares /usr and the rest of the tree,
so it behaves like its own machine (its processes, its home, its hostname) while installed software costs
nothing per node. PID 1 of the node's PID namespace is sshd itself: killing it crashes the node,
which then boots again, as a GCE VM does.
"""

from __future__ import annotations

import shlex
import socket
import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"


def sshd_config(listen_ip: str, host_key: Path, authorized_keys: Path | str, *,
                print_motd: bool = False) -> str:
    return "\n".join([
        "Port 22",
        f"ListenAddress {listen_ip}",
        f"HostKey {host_key}",
        "PidFile /run/sshd.pid",
        f"AuthorizedKeysFile {authorized_keys}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes yes",
        "X11Forwarding no",
        "AllowTcpForwarding no",
        "AllowAgentForwarding no",
        f"PrintMotd {'yes' if print_motd else 'no'}",
        "PrintLastLog no",
        # Dead controllers and cut links are noticed in ~15 s instead of never.
        "ClientAliveInterval 5",
        "ClientAliveCountMax 3",
        # Parallel bootstrap opens several sessions per node at once.
        "MaxStartups 100:30:200",
        "MaxSessions 64",
        f"Subsystem sftp {SFTP_SERVER}",
        "",
    ])


# What GCE's guest agent does at every boot: publish the host's SSH keys as guest attributes
# (namespace hostkeys, key = key type, value = the base64 key), where the controller reads them
# through its authenticated side instead of trusting the first key the network shows it.
PUBLISH_HOST_KEY = ("curl -sSf --retry 20 --retry-delay 0 --retry-max-time 20 --retry-connrefused "
                    "-X PUT -H 'Metadata-Flavor: Google' --data-binary \"$(cut -d' ' -f2 {pub})\" "
                    "http://metadata.google.internal/computeMetadata/v1/instance/guest-attributes/"
                    "hostkeys/$(cut -d' ' -f1 {pub})")


def cgroup_mounts(mountinfo: str) -> list[str]:
    """The host's cgroup hierarchies, mounted again inside a node: `ip netns exec` puts a fresh
    sysfs over /sys, which hides them, and a machine without cgroups cannot run containers (a
    VM has its own). Mounting a v1 hierarchy with the same subsystems attaches to the existing
    one, so the node sees the host's tree, as the host's own container runtime would."""
    commands = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or not fields[4].startswith("/sys/fs/cgroup"):
            continue
        point = fields[4]
        fstype, _source, options = line.split(" - ", 1)[1].split()[:3]
        if fstype == "tmpfs":
            commands.append(f"mount -t tmpfs -o mode=0755 cgroup {shlex.quote(point)}")
        elif fstype in ("cgroup", "cgroup2"):
            subsystems = ",".join(o for o in options.split(",") if o not in ("rw", "ro"))
            opts = f" -o {shlex.quote(subsystems)}" if subsystems else ""
            commands.append(f"mkdir -p {shlex.quote(point)} && mount -t {fstype}{opts} {fstype} {shlex.quote(point)}")
    return commands


def node_boot_script(hostname: str, private_root: Path, private_tmp: Path, config: Path,
                     log: Path, host_key_pub: Path | None, before_sshd: tuple[str, ...] = ()) -> str:
    """The machine's boot; `host_key_pub` None: it publishes no host key (a machine without a
    metadata server, whose key its maker pinned when it wrote it)."""
    q = shlex.quote
    cgroups = " && ".join(cgroup_mounts(Path("/proc/self/mountinfo").read_text()))
    return "; ".join([
        "set -e",
        f"hostname {q(hostname)}",
        # Without them the node still works, but cannot run containers: not a boot failure.
        *([f"{{ {cgroups}; }} || echo 'cgroups not mounted: no containers on this node' >&2"] if cgroups else []),
        "mount -t tmpfs -o mode=0755 tmpfs /run",
        "mkdir -p /run/sshd",
        "mount -t tmpfs -o mode=0755 tmpfs /var/log",
        f"mount --bind {q(str(private_root))} /root",
        f"mount --bind {q(str(private_tmp))} /tmp",
        *([PUBLISH_HOST_KEY.format(pub=q(str(host_key_pub)))] if host_key_pub else []),
        *before_sshd,
        f"exec {SSHD} -D -f {q(str(config))} -E {q(str(log))}",
    ])


# What GCE does for a VM whose kernel dies (automaticRestart, on by default): the node boots
# again, same disk, fresh memory. Here the "hypervisor" is this loop in the node's network
# namespace; `down` kills it with everything else in the namespace.
RESTART_DELAY_S = 1


def boot_node(netns: str, hostname: str, private_root: Path, private_tmp: Path, config: Path,
              log: Path, host_key_pub: Path) -> None:
    """Start the node detached from this process (it must outlive `trainctl up`)."""
    script = node_boot_script(hostname, private_root, private_tmp, config, log, host_key_pub)
    start_supervised(netns, hostname, script, log.with_suffix(".boot.log"))


# The boot chain's file descriptors 8 and 9 on this machine's own network and mount namespaces,
# for a machine that acts on this machine (the detached-run controller: its "cloud API").
HOST_NAMESPACE_FDS = 'exec 8</proc/self/ns/net 9</proc/self/ns/mnt; exec "$@"'


def start_supervised(netns: str, hostname: str, script: str, console: Path, *,
                     hold_host_namespaces: bool = False, while_exists: Path | None = None) -> None:
    """Run a machine's boot script as PID 1 of its own PID, mount and UTS namespace inside
    `netns`, booting it again whenever it ends; its output (the machine's console) goes to
    `console`. Detached from this process. With `hold_host_namespaces` the boot script inherits
    HOST_NAMESPACE_FDS; with `while_exists`, it boots again only while that path exists (a
    machine that removes itself from inside, where it cannot see this loop to end it)."""
    machine = ("unshare --mount --propagation private --pid --uts --fork --kill-child --mount-proc "
               '/bin/sh -c "$1"')
    booting = f"[ -e {shlex.quote(str(while_exists))} ]" if while_exists else ":"
    supervisor = (f'while {booting}; do {machine}; code=$?; echo "$(date -Is) node stopped (exit $code): '
                  f'booting it again in {RESTART_DELAY_S} s"; sleep {RESTART_DELAY_S}; done')
    with open(console, "ab") as out:
        holder = ["/bin/sh", "-c", HOST_NAMESPACE_FDS, "host-namespaces"] if hold_host_namespaces else []
        subprocess.run(
            ["setsid", "-f", *holder, "ip", "netns", "exec", netns, "/bin/sh", "-c", supervisor,
             f"node-{hostname}", script],
            check=True, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)


CONNECT_ATTEMPT_SECONDS = 0.2


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    delay = 0.02
    while time.monotonic() < deadline:
        try:
            # A short attempt: the first SYN into a namespace that has just come up can be lost
            # (its neighbour entry is not there yet), and the kernel resends it only after 1 s;
            # a new attempt goes out sooner. An sshd on this machine answers in milliseconds.
            with socket.create_connection((host, port), timeout=CONNECT_ATTEMPT_SECONDS):
                return True
        except OSError:
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
    return False
