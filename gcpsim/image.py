"""What a simulated machine boots from: its disk on this machine, and the script that makes a
node of it (own PID, mount and UTS namespace; sshd as PID 1 in the end).

The disk holds what a VM keeps across a stop: its /etc (an overlay over this host's /etc, so
users, sudoers and host keys made on the machine stay on it), /home and /root; /tmp is on the
disk too (GCE images keep /tmp on the boot disk). /run and /var/log are fresh each boot. /usr
is this host's, read-only (with dpkg's and apt's state): installing system packages on a
simulated machine fails instead of changing the host. The simulator's home and trainctl's
state are hidden (an empty tmpfs over them): a machine sees no key of the controller's.

A declared accelerator is simulated and the machine says so: /etc/trainctl-simulated-accelerators
lists them, the motd says it, and no `nvidia-smi` is found (if this host has one, it is covered),
so software that looks for a GPU sees none and training runs on CPU.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from namespace_nodes import keys
from gcpsim.machines import Machine
from namespace_nodes import sshd

GUEST_AGENT = Path(__file__).with_name("guest.py")
GUEST_PYTHON = "/usr/bin/python3"  # the image's interpreter (Debian's, shared from /usr)
GUEST_FD = 7  # the boot's descriptor of the agent's source; the agent closes it before sshd
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"
ACCELERATORS_FILE = "etc/trainctl-simulated-accelerators"  # relative to the root of /
READ_ONLY = ("/usr", "/var/lib/dpkg", "/var/lib/apt", "/var/cache/apt")
PATH_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def hidden_paths(home: Path) -> tuple[Path, ...]:
    """What a machine must not see: the simulator's home and trainctl's state (keys), unless
    they hold what machines need (the shared uv cache; the guest agent is read through a
    descriptor the boot opened before any mount)."""
    # The host's trainctl settings, read as the operator set them (the simulator imports nothing
    # of trainctl): its state holds private keys; its cache holds the packages machines install.
    needed = [Path(os.environ.get("TRAINCTL_CACHE", "/var/cache/trainctl")).resolve()]
    candidates = [home.resolve(), Path(os.environ.get("TRAINCTL_HOME", "/var/lib/trainctl")).resolve()]
    return tuple(p for p in candidates if not any(n.is_relative_to(p) for n in needed))


@dataclass(frozen=True)
class Disk:
    path: Path  # <machine dir>/disk

    @property
    def etc(self) -> Path:  # the overlay's upper layer: what the machine changed in /etc
        return self.path / "etc"

    @property
    def etc_work(self) -> Path:
        return self.path / "etc-work"

    @property
    def home(self) -> Path:
        return self.path / "home"

    @property
    def root(self) -> Path:
        return self.path / "root"

    @property
    def tmp(self) -> Path:
        return self.path / "tmp"

    def upper(self, path: str) -> Path:
        """Where the machine's /etc/<...> lives on the disk (written only while it is off)."""
        return self.etc / path.removeprefix("/etc/")


def prepare(disk: Disk, machine: Machine) -> None:
    """The disk as the machine boots from it: made on first boot (with new host keys, as an
    image's first boot makes them), refreshed from the machine's declaration on every boot."""
    for path, mode in ((disk.etc, 0o755), (disk.etc_work, 0o700), (disk.home, 0o755),
                       (disk.root, 0o700), (disk.tmp, 0o1777)):
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, mode)
    key = disk.upper(HOST_KEY)
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(key.parent, 0o755)
        keys.write_ed25519_keypair(key, f"root@{machine.name}")
    config = sshd.sshd_config("0.0.0.0", Path(HOST_KEY), ".ssh/authorized_keys", print_motd=True)
    disk.upper("/etc/ssh/sshd_config").write_text(config)
    accelerators = disk.etc / ACCELERATORS_FILE.removeprefix("etc/")
    if machine.accelerators:
        accelerators.write_text(accelerators_text(machine))
    else:
        accelerators.unlink(missing_ok=True)
    host_motd = Path("/etc/motd").read_text() if Path("/etc/motd").exists() else ""
    disk.upper("/etc/motd").write_text(host_motd + motd_line(machine) + "\n")


def accelerators_text(machine: Machine) -> str:
    lines = ["# Accelerators declared for this VM and simulated by trainctl's GCP simulator:",
             "# there is no device, no driver and no nvidia-smi on this machine; training runs on CPU.",
             "# <accelerator type> <count>"]
    lines += [f"{kind} {count}" for kind, count in sorted(machine.accelerators.items())]
    return "\n".join(lines) + "\n"


def motd_line(machine: Machine) -> str:
    line = (f"This is {machine.name}, a GCE VM simulated by trainctl on this host "
            f"({machine.machine_type or 'machine type not given'}).")
    if machine.accelerators:
        declared = ", ".join(f"{count} x {kind}" for kind, count in sorted(machine.accelerators.items()))
        line += (f" Its accelerators ({declared}) are simulated: no device, no driver; "
                 "training runs on CPU (see /etc/trainctl-simulated-accelerators).")
    return line


def boot_script(machine: Machine, disk: Disk, hosts: Path, hidden: tuple[Path, ...]) -> str:
    """The machine's boot, as PID 1 of its namespaces: mounts, then the guest agent (which
    ends as sshd). Everything under the simulator's home is mounted before that home is
    hidden."""
    q = shlex.quote
    cgroups = " && ".join(sshd.cgroup_mounts(Path("/proc/self/mountinfo").read_text()))
    overlay = f"lowerdir=/etc,upperdir={disk.etc},workdir={disk.etc_work}"
    steps = [
        "set -e",
        # The agent is opened before /root, /tmp and the homes are mounted over: a checkout under
        # any of them (/root/trainctl, /tmp/x) is hidden from the machine once they are.
        f"exec {GUEST_FD}< {q(str(GUEST_AGENT))}",
        f"hostname {q(machine.name)}",
        *([f"{{ {cgroups}; }} || echo 'cgroups not mounted: no containers on this machine' >&2"] if cgroups else []),
        "mount -t tmpfs -o mode=0755 tmpfs /run",
        "mkdir -p /run/sshd",
        "mount -t tmpfs -o mode=0755 tmpfs /var/log",
        f"mount -t overlay overlay -o {q(overlay)} /etc",
        f"mount --bind {q(str(hosts))} /etc/hosts",
        "mount -o remount,bind,ro /etc/hosts",
        f"mount --bind {q(str(disk.home))} /home",
        f"mount --bind {q(str(disk.root))} /root",
        *(f"if [ -d {d} ]; then mount --bind {d} {d} && mount -o remount,bind,ro {d}; fi" for d in READ_ONLY),
        # A GPU driver on this host must not make a simulated GPU look real.
        *(f"if [ -e {d}/nvidia-smi ]; then mount --bind /dev/null {d}/nvidia-smi; fi" for d in PATH_DIRS),
        f"mount --bind {q(str(disk.tmp))} /tmp",
        *(f"if [ -d {q(str(p))} ]; then mount -t tmpfs -o mode=0700 tmpfs {q(str(p))}; fi" for p in hidden),
        f"exec {GUEST_PYTHON} -I -S /dev/fd/{GUEST_FD}",
    ]
    return "; ".join(steps)


def hosts_text(entries: list[tuple[str, str]]) -> str:
    """/etc/hosts of a network's machines: GCE's internal names (`name.zone.c.project.internal`
    and `name`), forward and as IPv4-mapped addresses (dual-stack listeners look those up)."""
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback",
             "169.254.169.254 metadata.google.internal metadata"]
    lines += [f"{ip} {names}" for ip, names in entries]
    lines += [f"::ffff:{ip} {names}" for ip, names in entries]
    return "\n".join(lines) + "\n"


def write_in_place(path: Path, text: str) -> None:
    """Rewrite a file keeping its inode: machines see it through a bind mount of that inode."""
    if not path.exists():
        path.write_text(text)
        return
    with open(path, "r+") as fh:
        fh.write(text)
        fh.truncate()
