"""The idle watch of a GCP VM stack, running on its node 0 (started there by the startup script
idle_autostop.py declares): the stack stops itself without the user's laptop.

It applies the shared rule (infra/providers/idle_rule.py) to what node 0 sees:
  - sessions: sshd processes whose parent is an sshd (a connection's own process: every
    trainctl `run`, `launch`, `exec` and `ssh` holds one on node 0, rank 0's node);
  - CPU: what the node's processes (its own excepted) used since the last look;
  - GPUs: NVML's utilisation (nvidia-ml-py) where the module and a GPU exist, else none asked.
What it saw goes to the guest attribute trainctl/idle-since (for `trainctl ls`). Once idle for
the window, it marks every VM of the stack expired (label trainctl-expires = now) through the
Compute API with node 0's own token from the metadata server, and stops watching: the reaper
(the scheduled function, or `trainctl reap`) deletes them, as it deletes any expired stack.
Its account may only read and relabel this stack's VMs (the grant idle_autostop.py declares),
so it cannot delete anything itself.

Shipped as source with idle_rule.py and run by the node's python3: the standard library only.
Its settings are the instance attribute trainctl-idle-watch (JSON: idle_seconds, instances,
compute_endpoint).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from typing import Any, Iterator

from infra.providers.idle_rule import IdleWindow, busy, cores_used, poll_seconds

METADATA = "http://metadata.google.internal/computeMetadata/v1/"
FLAVOR = {"Metadata-Flavor": "Google"}
CONFIG_ATTRIBUTE = "trainctl-idle-watch"
IDLE_ATTRIBUTE = "trainctl/idle-since"  # guest attribute <namespace>/<key>
EXPIRY_LABEL = "trainctl-expires"


def metadata(path: str, timeout: float = 10) -> str:
    request = urllib.request.Request(METADATA + path, headers=FLAVOR)
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return str(answer.read().decode())


def publish_idle_since(idle_since: float | None) -> None:
    """Where `trainctl ls` reads it (getGuestAttributes); a failed write only loses the display."""
    body = ("" if idle_since is None else str(int(idle_since))).encode()
    request = urllib.request.Request(METADATA + "instance/guest-attributes/" + IDLE_ATTRIBUTE, data=body,
                                     headers=FLAVOR, method="PUT")
    try:
        urllib.request.urlopen(request, timeout=10).close()
    except OSError as exc:
        print(f"could not publish idle time: {exc}", flush=True)


# -- what node 0 runs -------------------------------------------------------------------------

def processes(proc: str = "/proc") -> Iterator[tuple[int, int, str, float]]:
    """(pid, parent pid, command name, CPU seconds incl. reaped children) of every process."""
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:  # gone meanwhile
            continue
        # comm sits in parentheses and may hold spaces: the fields after the last ')' are fixed
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        cpu = sum(int(f) for f in fields[11:15]) / ticks  # utime stime cutime cstime
        yield int(entry), int(fields[1]), name, cpu


def sessions_and_cpu(proc: str = "/proc", me: int | None = None) -> tuple[int, dict[int, float]]:
    """SSH sessions open on this node, and each process's CPU seconds (this watch's excepted)."""
    seen = list(processes(proc))
    names = {pid: name for pid, _, name, _ in seen}
    sessions = sum(1 for _, parent, name, _ in seen
                   if name.startswith("sshd") and names.get(parent, "").startswith("sshd"))
    return sessions, {pid: cpu for pid, _, _, cpu in seen if pid != me}


def gpu_percent() -> float | None:
    """The busiest GPU's utilisation, or None where there is no GPU or no nvidia-ml-py."""
    try:
        import pynvml  # nvidia-ml-py: GPU images have it or the driver alone; optional
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # no driver, no GPU
        return None
    try:
        count = pynvml.nvmlDeviceGetCount()
        rates = [pynvml.nvmlDeviceGetUtilizationRates(pynvml.nvmlDeviceGetHandleByIndex(i)).gpu
                 for i in range(count)]
        return float(max(rates)) if rates else None
    finally:
        pynvml.nvmlShutdown()


# -- marking the stack expired ----------------------------------------------------------------

def _compute(method: str, url: str, token: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return dict(json.loads(answer.read() or b"{}"))


def mark_expired(config: dict[str, Any], now: float) -> None:
    """Label every VM of the stack expired (instances.get for the fingerprint setLabels needs)."""
    token = json.loads(metadata("instance/service-accounts/default/token"))["access_token"]
    project = metadata("project/project-id")
    zone = metadata("instance/zone").rsplit("/", 1)[-1]
    base = f"{config['compute_endpoint'].rstrip('/')}/projects/{project}/zones/{zone}/instances/"
    for name in config["instances"]:
        current = _compute("GET", base + name, token)
        labels = {**current.get("labels", {}), EXPIRY_LABEL: str(int(now))}
        _compute("POST", base + name + "/setLabels", token,
                 {"labels": labels, "labelFingerprint": current.get("labelFingerprint", "")})
        print(f"marked {name} expired", flush=True)


def watch(config: dict[str, Any]) -> None:
    idle_seconds = float(config["idle_seconds"])
    poll, me = poll_seconds(idle_seconds), os.getpid()
    window = IdleWindow(idle_seconds)
    _, last = sessions_and_cpu(me=me)
    last_at = time.monotonic()
    while True:
        time.sleep(poll)
        sessions, now = sessions_and_cpu(me=me)
        now_at = time.monotonic()
        window.observe(busy(sessions, cores_used(last, now, now_at - last_at), gpu_percent()), time.time(), poll)
        last, last_at = now, now_at
        publish_idle_since(window.idle_since)
        if window.expired(time.time()):
            print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} idle for {idle_seconds:.0f} s: marking the stack "
                  "expired for the reaper", flush=True)
            try:
                mark_expired(config, time.time())
                return
            except OSError as exc:  # an API refusal or a network fault: the next look tries again
                print(f"could not mark the stack expired: {exc}", flush=True)


def main() -> None:
    config = json.loads(metadata(f"instance/attributes/{CONFIG_ATTRIBUTE}"))
    watch(config)


if __name__ == "__main__":
    main()
