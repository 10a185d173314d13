"""What a Job's pods on a GPUDirect node pool carry, as Google's GKE recipes declare it
(GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpxo/nccl-test-latest.yaml and
gpudirect-rdma/nccl-test.yaml; Cluster Toolkit's enable-tcpxo-in-workload.py):

- `networking.gke.io/default-interface` and `networking.gke.io/interfaces`, naming every extra
  network's Network object (infra/spec/gke_gpudirect.py; the provider creates them after `up`);
- TCPXO: the receive-data-path manager `tcpxo-daemon` beside the trainer, with the GPUs handed to
  it by `devices.gke.io/container.tcpxo-daemon`, the host's /sys and /proc/sys, and the plugin's
  libraries, which the installer DaemonSet copied into the node's NVIDIA library folder. It runs as
  a native sidecar (an init container with restartPolicy Always) instead of the recipes' second
  container: a Job's pod then completes when the trainer exits, and the daemon is stopped with it;
- the trainer's NCCL environment: the very settings VMs of the family get (gpu_networks.py), with
  the VM's interface names turned into the pod's and the plugin's folder into the pod's mount.

A simulated cluster's pods have none of the plugin's files: they keep every declared part but do
not source the plugin's profile, and their ranks run gloo on CPU (as simulated VMs do).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from infra.errors import ConfigError
from infra.spec.cluster import ClusterSpec
from infra.spec.gke_gpudirect import PodNetwork, interfaces_annotation, pod_networks, pool_gpudirect
from infra.spec import gpu_networks
from infra.spec.gpu_networks import GpuDirect

_AR = "us-docker.pkg.dev/gce-ai-infra"
RXDM_IMAGE = f"{_AR}/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"
SIDECAR = "tcpxo-daemon"
POD_LIBRARIES = "/usr/local/nvidia/lib64"  # the node's /home/kubernetes/bin/nvidia/lib64
# Where each family's VM recipe puts the plugin, and where a pod finds the same files.
_VM_LIBRARIES = {"tcpxo": "/var/lib/tcpxo/lib64", "rdma": "/usr/local/gib/lib64"}
_POD_LIBRARIES = {"tcpxo": POD_LIBRARIES, "rdma": "/usr/local/gib/lib64"}
_GPU_DEVICES = [*(f"/dev/nvidia{i}" for i in range(8)), "/dev/nvidiactl", "/dev/nvidia-uvm",
                "/dev/dmabuf_import_helper"]


@dataclass
class GpuDirectPod:
    """The parts merged into the Job's pod template and its trainer container."""

    annotations: dict[str, str] = field(default_factory=dict)
    init_containers: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    mounts: list[dict[str, str]] = field(default_factory=list)
    preamble: str = ""


def _host_path(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path}}


def _memory(size: str) -> dict[str, Any]:
    return {"name": "shared-memory", "emptyDir": {"medium": "Memory", "sizeLimit": size}}


def pod_env(profile: GpuDirect, networks: list[PodNetwork], vm_gpu_ifaces: str, vm_ctrl: str) -> dict[str, str]:
    """The family's NCCL variables with the VM's interface names replaced by the pod's."""
    gpu = ",".join(n.interface for n in networks if n.device_mode == "NetDevice")
    renamed = {vm_gpu_ifaces: gpu, vm_ctrl: "eth0"}
    return {k: renamed.get(v, v) for k, v in profile.nccl.env.items()}


def pod_preamble(profile: GpuDirect) -> str:
    """The VM's shell lines (libraries first, the plugin's profile sourced) pointed at the pod's mount."""
    vm, pod = _VM_LIBRARIES[profile.transport], _POD_LIBRARIES[profile.transport]
    return "".join(f"{line.replace(vm, pod)}; " for line in profile.nccl.env_script)


def _tcpxo(pod: GpuDirectPod) -> None:
    pod.annotations["devices.gke.io/container.tcpxo-daemon"] = "".join(f"- path: {d}\n" for d in _GPU_DEVICES)
    pod.volumes += [_host_path("nvidia", "/home/kubernetes/bin/nvidia/lib64"), _memory("1Gi"),
                    _host_path("sys", "/sys"), _host_path("proc-sys", "/proc/sys"),
                    _host_path("aperture-devices", "/dev/aperture_devices")]
    pod.init_containers.append({
        "name": SIDECAR, "image": RXDM_IMAGE, "restartPolicy": "Always",
        "command": ["/bin/sh", "-c"],
        "args": ["set -ex; chmod 755 /fts/entrypoint_rxdm_container.sh; "
                 "/fts/entrypoint_rxdm_container.sh --num_hops=2"],
        "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}},
        "volumeMounts": [{"name": "nvidia", "mountPath": POD_LIBRARIES}, {"name": "sys", "mountPath": "/hostsysfs"},
                         {"name": "proc-sys", "mountPath": "/hostprocsysfs"}],
        "env": [{"name": "LD_LIBRARY_PATH", "value": POD_LIBRARIES}]})
    pod.mounts += [{"name": "nvidia", "mountPath": POD_LIBRARIES}, {"name": "shared-memory", "mountPath": "/dev/shm"},
                   {"name": "aperture-devices", "mountPath": "/dev/aperture_devices"}]


def _rdma(pod: GpuDirectPod) -> None:
    pod.volumes += [_host_path("library-dir-host", "/home/kubernetes/bin/nvidia"),
                    _host_path("gib", "/home/kubernetes/bin/gib"), _memory("250Gi")]
    pod.mounts += [{"name": "library-dir-host", "mountPath": "/usr/local/nvidia"},
                   {"name": "gib", "mountPath": "/usr/local/gib"}, {"name": "shared-memory", "mountPath": "/dev/shm"}]


def gpudirect_pod(cluster: ClusterSpec, simulated: bool) -> GpuDirectPod | None:
    """The pool's GPUDirect parts, or None where the pool has no GPUDirect family."""
    profile = pool_gpudirect(cluster)
    if profile is None:
        return None
    if profile.transport == "tcpx":
        raise ConfigError(f"stack {cluster.name}: GPUDirect-TCPX ({cluster.machine_type}) pods on GKE are not "
                          "built by trainctl yet (its tcpx-daemon sidecar); use a VM stack, or a3-megagpu-8g")
    networks = pod_networks(cluster)
    pod = GpuDirectPod(annotations={
        "networking.gke.io/default-interface": "eth0",
        "networking.gke.io/interfaces": json.dumps(interfaces_annotation(networks))})
    (_tcpxo if profile.transport == "tcpxo" else _rdma)(pod)
    pod.env = {"LD_LIBRARY_PATH": POD_LIBRARIES,
               **pod_env(profile, networks, gpu_networks.VM_GPU_INTERFACES.get(profile.transport, ""),
                         gpu_networks.VM_CTRL_INTERFACE)}
    pod.preamble = "" if simulated else pod_preamble(profile)
    return pod


def apply(pod_spec: dict[str, Any], template_meta: dict[str, Any], pod: GpuDirectPod) -> None:
    """Merge the parts into a pod spec whose first container is the trainer."""
    template_meta.setdefault("annotations", {}).update(pod.annotations)
    if pod.init_containers:
        pod_spec["initContainers"] = pod.init_containers
    pod_spec["volumes"] = [*(pod_spec.get("volumes") or []), *pod.volumes]
    trainer = pod_spec["containers"][0]
    trainer["volumeMounts"] = [*(trainer.get("volumeMounts") or []), *pod.mounts]
    given = {e["name"] for e in trainer["env"]}  # the user's own env wins, as on VMs
    trainer["env"] = [*({"name": k, "value": v} for k, v in pod.env.items() if k not in given), *trainer["env"]]
