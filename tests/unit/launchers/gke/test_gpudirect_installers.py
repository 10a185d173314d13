"""The installer DaemonSets a GKE GPUDirect pool gets: on A3 Mega, the init container that runs in
the node's namespaces first does what Google's does (container-engine-accelerators
gpudirect-tcpxo/nccl-tcpxo-installer.yaml, "pre-installation", line 57: open TCP input and
`modprobe import-helper`), then bind-mounts the aperture devices; the NCCL plugin's installer
comes after it. RDMA pools have no such step."""

from __future__ import annotations

from infra.spec.gke_gpudirect_installers import installers
from infra.spec.stack_config import load_stack

# Verbatim from Google's installer (line 57), so a change on either side is seen here.
GOOGLES_LINE_57 = "/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT && modprobe import-helper"


def daemon_sets(machine_type: str | None = None) -> dict[str, dict]:
    cluster = load_stack("gke-a3mega")
    if machine_type is not None:
        cluster = cluster.model_copy(update={"machine_type": machine_type})
    return {d["metadata"]["name"]: d for d in installers(cluster)}


def test_a3_mega_installer_loads_the_import_helper_in_the_host_before_mounting_the_apertures():
    pod = daemon_sets()["nccl-tcpxo-installer"]["spec"]["template"]["spec"]
    assert pod["hostPID"] is True  # nsenter -t 1 reaches the node's own PID 1
    pre, install = pod["initContainers"]
    assert pre["command"][:6] == ["nsenter", "-at", "1", "--", "sh", "-c"]
    script = pre["command"][6]
    assert script.startswith(GOOGLES_LINE_57 + "; ")
    assert script.index("modprobe import-helper") < script.index("mount --bind")
    assert pre["name"] == "pre-installation" and pre["securityContext"] == {"privileged": True}
    assert install["name"] == "nccl-plugin-installer"


def test_rdma_installers_load_no_import_helper():
    for machine in ("a3-ultragpu-8g", "a4-highgpu-8g"):
        (rdma,) = daemon_sets(machine).values()
        init = rdma["spec"]["template"]["spec"]["initContainers"]
        assert not any("import-helper" in " ".join(c.get("command", []) + c.get("args", [])) for c in init), machine
