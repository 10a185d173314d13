"""Pods as processes: the simulated kubelet runs each pod's container command on this machine.

What a pod gets, and what stands in for what a GKE node would give it:
  - its command and args, as written, with its environment from the pod spec (values, and the
    fieldRef the Job controller adds for JOB_COMPLETION_INDEX), plus the image's PATH (images.py)
    and the Kubernetes service variables;
  - PID, mount and UTS namespaces of its own: its command is PID 1, as in a container (so a
    SIGTERM at deletion reaches it only where it handles it, as in a container; the grace
    period's SIGKILL ends it and everything it started), /proc shows the pod's processes only,
    and the pod dies with the kubelet's process, whatever ends that;
  - a hostname of its own (spec.hostname) and a hosts file of its own: the pod's name and, where a headless Service named by its subdomain selects the
    Job's pods, every pod of the Job by `<host>.<subdomain>[.<ns>.svc.cluster.local]`, as cluster
    DNS answers them; each pod has a loopback address of its own (127.a.b.c) that those names
    point at, and that gloo and the c10d store bind to by the pod's hostname;
  - Workload Identity: the pod's Cloud Storage calls go to the simulator's storage
    (STORAGE_EMULATOR_HOST), as the node's metadata server would hand it a token for Google's;
  - Cloud Storage FUSE CSI volumes at their mountPaths (volumes.py: the objects copied in).
Not given: a container (files, users, CPU and memory are this machine's, shared with every other
pod), a network namespace (ports are this machine's: two Jobs whose pods bind the same port at
once collide), accelerators (declared requests are reported, nothing is attached).
Deletion is as the kubelet does it: SIGTERM to the pod's processes, SIGKILL after the grace period.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gcpsim.kubernetes import images, volumes
from gcpsim.kubernetes.objects import INDEX_LABEL, Obj, labels_match

if TYPE_CHECKING:
    from gcpsim.kubernetes.jobs import JobController

IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # a Debian image's ENV PATH
# Run as root, or else in a user namespace of its own, so that a pod may mount its hosts file
# and set its hostname; then exec the container's command.
POD_SETUP = 'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"'
KUBELET = "[simulated kubelet]"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class ProcessPods:
    def __init__(self, home: Path, folder: Path, prefix: str, api_address: str, api_port: int,
                 storage_url: str) -> None:
        self.home, self.folder, self.prefix = home, folder, prefix  # prefix: "127.a.b"
        self.api_address, self.api_port, self.storage_url = api_address, api_port, storage_url
        self.lock = threading.Lock()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}  # pod uid -> its process
        self.cancelled: set[str] = set()
        self.addresses: dict[tuple[str, int], str] = {}  # (job uid, index) -> address

    # -- the PodRunner protocol ---------------------------------------------------------------

    def start(self, api: JobController, job: Obj, pod: Obj, attempt: int, tries: int) -> None:
        index = int(pod["metadata"]["annotations"][INDEX_LABEL])
        ip = self._address(job, index)
        hosts = self._hosts(api, job, pod, ip)
        api.spawn(self._run, api, pod, ip, hosts)

    def stop(self, pod: Obj, grace: float) -> int | None:
        uid = pod["metadata"]["uid"]
        with self.lock:
            self.cancelled.add(uid)
            proc = self.procs.get(uid)
        if proc is None:
            return None
        _signal(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL)
            proc.wait()
        return _exit_code(proc.returncode)

    def forget(self, job: Obj) -> None:
        with self.lock:
            for key in [k for k in self.addresses if k[0] == job["metadata"]["uid"]]:
                del self.addresses[key]

    def close(self) -> None:
        with self.lock:
            procs = list(self.procs.values())
        for proc in procs:
            _signal(proc, signal.SIGKILL)
            proc.wait()

    # -- a pod's life ------------------------------------------------------------------------------

    def _address(self, job: Obj, index: int) -> str:
        """The Job's pod `index` keeps its address across replacement pods (its name stays)."""
        with self.lock:
            key = (job["metadata"]["uid"], index)
            if key not in self.addresses:
                taken = set(self.addresses.values())
                free = next((f"{self.prefix}.{n}" for n in range(2, 255) if f"{self.prefix}.{n}" not in taken), None)
                if free is None:
                    raise RuntimeError(f"no loopback address left in {self.prefix}.0/24 for another pod")
                self.addresses[key] = free
            return self.addresses[key]

    def _hosts(self, api: JobController, job: Obj, pod: Obj, ip: str) -> str:
        """The pod's hosts file, as the kubelet writes it, with the names cluster DNS would
        answer for the Job's pods where a headless Service publishes them (holds api.cond)."""
        spec, ns = pod["spec"], pod["metadata"]["namespace"]
        sub = spec.get("subdomain")
        lines = ["# Kubernetes-managed hosts file (simulated kubelet).", "127.0.0.1\tlocalhost",
                 "::1\tlocalhost ip6-localhost ip6-loopback"]
        service = api.objects.get(("services", ns, sub)) if sub else None
        published = service is not None and labels_match(service["spec"].get("selector") or {},
                                                         pod["metadata"].get("labels") or {})
        name = job["metadata"]["name"]
        for index in range(job["spec"]["completions"]):
            host = f"{name}-{index}"
            if host != spec["hostname"] and not published:
                continue
            names = [f"{host}.{sub}.{ns}.svc.cluster.local", f"{host}.{sub}"] if sub else []
            lines.append("\t".join([self._address(job, index), *names, host]))
        return "\n".join(lines) + "\n"

    def _run(self, api: JobController, pod: Obj, ip: str, hosts: str) -> None:
        container = pod["spec"]["containers"][0]
        try:
            stand_in = images.resolve(self.home, container["image"])
        except (images.ImageUnavailable, OSError) as exc:  # OSError: its environment could not be made
            api.container_waiting(pod, "ErrImagePull", str(exc))
            return
        folder = self.folder / "pods" / pod["metadata"]["uid"]
        workdir = stand_in.workdir or folder / "work"
        for path in (folder, workdir, folder / "home"):
            path.mkdir(parents=True, exist_ok=True)
        (folder / "hosts").write_text(hosts)
        try:
            env = self._environment(pod, container, stand_in, ip, folder)
            mounts = volumes.gcsfuse_mounts(pod, container, folder, self.storage_url)
        except ValueError as exc:
            api.container_waiting(pod, "CreateContainerConfigError", str(exc))
            return
        argv = self._argv(pod, container, folder / "hosts", mounts)
        if not api.container_started(pod, ip):
            return
        for line in self._header(pod, container, stand_in, ip):
            api.container_output(pod, line)
        paths = [m.path for m in mounts]
        volumes.MountPoints.hold(paths)
        try:
            proc = self._spawn(pod, argv, workdir, env)
            if isinstance(proc, OSError):  # as a runtime that cannot start the container: 128
                api.container_output(pod, f"{KUBELET} could not start the pod's process: {proc}")
                api.container_exited(pod, 128)
            elif proc is not None:
                self._follow(api, pod, proc, folder)
        finally:
            volumes.MountPoints.release(paths)

    def _spawn(self, pod: Obj, argv: list[str], workdir: Path,
               env: dict[str, str]) -> subprocess.Popen[bytes] | OSError | None:
        """The pod's process, unless its deletion came first (None)."""
        with self.lock:
            if pod["metadata"]["uid"] in self.cancelled:
                return None
            try:
                proc = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)
            except OSError as exc:
                return exc
            self.procs[pod["metadata"]["uid"]] = proc
            return proc

    def _follow(self, api: JobController, pod: Obj, proc: subprocess.Popen[bytes], folder: Path) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            api.container_output(pod, raw.decode("utf-8", "replace").rstrip("\r\n"))
        code = _exit_code(proc.wait())
        api.container_exited(pod, code)
        with self.lock:
            self.procs.pop(pod["metadata"]["uid"], None)
        shutil.rmtree(folder, ignore_errors=True)

    def _argv(self, pod: Obj, container: Obj, hosts: Path, mounts: list[volumes.Mount]) -> list[str]:
        command = [*(container.get("command") or []), *(container.get("args") or [])]
        if not command:
            command = ["sh", "-c", "echo 'the image stand-in has no entrypoint: give the container a command' >&2; exit 127"]
        ns_flags = ["--mount", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private"]
        if os.geteuid() != 0:
            ns_flags.append("--map-root-user")
        setup = " && ".join([m.shell() for m in mounts] + [POD_SETUP])  # volumes first, then the pod's own
        return ["unshare", *ns_flags, "--", "sh", "-c", setup, "pod-setup", str(hosts),
                pod["spec"]["hostname"], *command]

    def _environment(self, pod: Obj, container: Obj, stand_in: images.StandIn, ip: str,
                     folder: Path) -> dict[str, str]:
        """Image ENV, then what Kubernetes adds, then the container's own env (it wins)."""
        path = f"{stand_in.env / 'bin'}:{IMAGE_PATH}" if stand_in.env else IMAGE_PATH
        env = {"PATH": path, "HOME": str(folder / "home"), "HOSTNAME": pod["spec"]["hostname"],
               "LANG": "C.UTF-8", "TMPDIR": str(folder / "home"),
               "KUBERNETES_SERVICE_HOST": self.api_address, "KUBERNETES_SERVICE_PORT": str(self.api_port),
               "STORAGE_EMULATOR_HOST": self.storage_url, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
        if stand_in.env:
            env["VIRTUAL_ENV"] = str(stand_in.env)
        for item in container.get("env") or []:
            if "value" in item or "valueFrom" not in item:
                env[item["name"]] = str(item.get("value", ""))
            else:
                env[item["name"]] = _field(pod, item["valueFrom"], ip)
        return env

    def _header(self, pod: Obj, container: Obj, stand_in: images.StandIn, ip: str) -> list[str]:
        lines = [f"{KUBELET} pod {pod['metadata']['name']} on node {pod['spec']['nodeName']} is a process on this "
                 f"machine, not a container: image {container['image']} is stood in for by {stand_in.describe}; "
                 "files, CPU and memory are not isolated",
                 f"{KUBELET} hostname {pod['spec']['hostname']}, address {ip} on this machine's loopback "
                 "(no network namespace: ports are shared with the machine)"]
        limits = (container.get("resources") or {}).get("limits") or {}
        declared = {k: v for k, v in limits.items() if "/" in k}
        if declared:
            lines.append(f"{KUBELET} accelerators requested ({', '.join(f'{k}={v}' for k, v in declared.items())}) "
                         "are declared, not present: the pod computes on CPU")
        return lines


def _field(pod: Obj, value_from: dict[str, Any], ip: str) -> str:
    """The downward API's fieldRef values a pod may ask for."""
    path = (value_from.get("fieldRef") or {}).get("fieldPath", "")
    mapped = re.fullmatch(r"metadata\.(annotations|labels)\['([^']+)'\]", path)
    if mapped:
        return str((pod["metadata"].get(mapped[1]) or {}).get(mapped[2], ""))
    simple = {"metadata.name": pod["metadata"]["name"], "metadata.namespace": pod["metadata"]["namespace"],
              "metadata.uid": pod["metadata"]["uid"], "spec.nodeName": pod["spec"].get("nodeName", ""),
              "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"), "status.podIP": ip}
    if path not in simple:
        raise ValueError(f"the simulated kubelet resolves fieldRef values only (not {value_from})")
    return simple[path]


def _die_with_parent() -> None:
    """In the pod's first process, before exec: SIGKILL when the kubelet thread that started it
    ends (the daemon killed, say); `unshare --kill-child` then ends the pod's PID namespace."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _exit_code(returncode: int) -> int:
    """As container runtimes report it: 128 + the signal that ended the process."""
    return 128 - returncode if returncode < 0 else returncode
