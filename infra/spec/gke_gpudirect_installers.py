"""The DaemonSets a GKE GPUDirect pool needs on its nodes before a Job's pods can use the GPU NICs,
as Google's recipes deploy them (GoogleCloudPlatform/container-engine-accelerators:
gpudirect-tcpxo/nccl-tcpxo-installer.yaml, nri_device_injector/nri-device-injector.yaml,
gpudirect-rdma/nccl-rdma-installer.yaml): the NCCL plugin copied into the node's NVIDIA library
folder (/home/kubernetes/bin/nvidia/lib64, which pods mount), for TCPXO the dmabuf import helper
module loaded, the aperture devices the plugin's LLCM reads bind-mounted under /dev/aperture_devices
and the NRI device injector that hands a pod's `devices.gke.io/container.<name>` devices to that
container. Each runs its work in init containers, then idles in a pause container, only on nodes
of the pool's accelerator.
"""

from __future__ import annotations

from typing import Any

from infra.spec.cluster import ClusterSpec
from infra.spec.gke_gpudirect import pool_gpudirect

_AR = "us-docker.pkg.dev/gce-ai-infra"
TCPXO_PLUGIN_IMAGE = f"{_AR}/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15"
GIB_PLUGIN_IMAGE = f"{_AR}/gpudirect-gib/nccl-plugin-gib:v1.1.1"
NRI_INJECTOR_IMAGE = ("gcr.io/gke-release/nri-device-injector"
                      "@sha256:6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970")
PAUSE_IMAGE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
NAMESPACE = "kube-system"
# Google's "pre-installation" init container (gpudirect-tcpxo/nccl-tcpxo-installer.yaml lines
# 44-70, container-engine-accelerators @992db81), run in the host's namespaces (nsenter into PID 1):
# line 57 opens the node's TCP input and loads the dmabuf import helper module (whose
# /dev/dmabuf_import_helper the pods are handed, nccl-test-latest.yaml); then the aperture
# devices (PCI id 1ae0:0084) are bind-mounted where the plugin's LLCM looks for them, readable
# by unprivileged containers.
# As there, each line runs whatever the one before did (no `set -e`).
IMPORT_HELPER = "/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT && modprobe import-helper"
_PRE_INSTALLATION = (
    f"{IMPORT_HELPER}; "
    "mkdir -p /dev/aperture_devices; "
    "for bdf in $(lspci -D -d 1ae0:0084 | cut -d' ' -f1); do "
    "dir=/dev/aperture_devices/$bdf; mkdir -p $dir; umount -R $dir 2>/dev/null || true; "
    "mount --bind $(readlink -f /sys/bus/pci/devices/$bdf) $dir; done; "
    "chmod -R a+r /dev/aperture_devices; chmod a+rw /dev/aperture_devices/*/resource* 2>/dev/null || true")


def _host(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path}}


def _daemon_set(name: str, accelerator: str, init: list[dict[str, Any]], volumes: list[dict[str, Any]],
                labels: dict[str, str]) -> dict[str, Any]:
    selector = {"k8s-app": name}
    on_pool = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": [accelerator]}]}]}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {**labels, **selector}},
            "spec": {"selector": {"matchLabels": selector}, "updateStrategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": {**labels, **selector}}, "spec": {
                         "priorityClassName": "system-node-critical",
                         "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": on_pool}},
                         "tolerations": [{"operator": "Exists"}], "hostNetwork": True, "hostPID": True,
                         "volumes": volumes, "initContainers": init,
                         "containers": [{"name": "pause", "image": PAUSE_IMAGE}]}}}}


def _installer(image: str, script: str, mounts: list[dict[str, str]]) -> dict[str, Any]:
    return {"name": "nccl-plugin-installer", "image": image, "securityContext": {"privileged": True},
            "resources": {"requests": {"cpu": "150m"}}, "volumeMounts": mounts,
            "command": ["/bin/sh", "-c"],
            "args": [f"set -ex; /scripts/container_entry.sh install --install-nccl; {script}"]}


def _tcpxo(accelerator: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    apertures = {"name": "pre-installation", "image": "ubuntu", "securityContext": {"privileged": True},
                 "command": ["nsenter", "-at", "1", "--", "sh", "-c", _PRE_INSTALLATION]}
    install = _installer(TCPXO_PLUGIN_IMAGE,
                         "mkdir -p /usr/local/nvidia/lib64; cp -r /var/lib/tcpxo/lib64/. /usr/local/nvidia/lib64",
                         [{"name": "var-lib", "mountPath": "/var/lib"},
                          {"name": "library-dir-host", "mountPath": "/usr/local"}])
    injector = _daemon_set("device-injector", accelerator, [], [_host("dev", "/dev"), _host("nri", "/var/run/nri")],
                           labels)
    injector["spec"]["template"]["spec"].pop("initContainers")
    injector["spec"]["template"]["spec"]["containers"] = [{
        "name": "device-injector", "image": NRI_INJECTOR_IMAGE, "securityContext": {"privileged": True},
        "resources": {"requests": {"cpu": "150m"}},
        "volumeMounts": [{"name": "dev", "mountPath": "/dev"}, {"name": "nri", "mountPath": "/var/run/nri"}]}]
    return [_daemon_set("nccl-tcpxo-installer", accelerator, [apertures, install],
                        [_host("var-lib", "/var/lib"), _host("library-dir-host", "/home/kubernetes/bin")], labels),
            injector]


def _rdma(accelerator: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    install = _installer(GIB_PLUGIN_IMAGE, "cp -r /var/lib/gib/lib64/. /usr/local/home/kubernetes/bin/nvidia/lib64; "
                         "cp -r /var/lib/gib/. /usr/local/home/kubernetes/bin/gib",
                         [{"name": "library-dir-host", "mountPath": "/usr/local/home/kubernetes/bin/nvidia/lib64"},
                          {"name": "gib", "mountPath": "/usr/local/home/kubernetes/bin/gib"}])
    libraries = {"name": "library-dir-host", "hostPath": {"path": "/home/kubernetes/bin/nvidia/lib64",
                                                          "type": "DirectoryOrCreate"}}
    return [_daemon_set("nccl-rdma-installer", accelerator, [install],
                        [libraries, _host("gib", "/home/kubernetes/bin/gib")], labels)]


def installers(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The pool's DaemonSets (none for a pool without GPUDirect or a TCPX one, which GKE pods do not use)."""
    profile = pool_gpudirect(spec)
    if profile is None or spec.gpu is None or profile.transport == "tcpx":
        return []
    labels = {"app.kubernetes.io/managed-by": "trainctl", "trainctl-stack": spec.name}
    return (_tcpxo if profile.transport == "tcpxo" else _rdma)(spec.gpu.type, labels)
