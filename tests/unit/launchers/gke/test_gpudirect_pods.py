"""A Job on a GKE GPUDirect pool: its pods name every extra network in GKE's multi-networking
annotations, TCPXO pods run the receive-data-path manager beside the trainer with the recipe's
volumes, and the trainer gets the family's NCCL settings from the same table VMs use, with the
pod's interface names. A pool without GPUDirect gets none of it."""

from __future__ import annotations

import json

import pytest

from infra.providers.inventory import Inventory, Node
from infra.spec import gpu_networks
from infra.spec.gke_gpudirect import network_objects, pod_networks
from infra.spec.stack_config import ConfigError, load_stack
from trainctl.launchers.gke.manifests import manifests, validate
from trainctl.launchers.spec import LaunchSpec

GSA = "g-sa@p.iam.gserviceaccount.com"
SPEC = LaunchSpec(run_id="r1", framework="torch", command=("python", "-m", "trainers.digits_ddp"),
                  env={"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "mine"})


def inventory(simulated: bool) -> Inventory:
    node = Node(name="n0", rank=0, internal_ip="10.0.0.2", ssh_host="10.0.0.2", host_keys=(), workdir="/w",
                accelerator="cpu", simulates="gpu:8xnvidia-h100-mega-80gb") if simulated else None
    return Inventory(stack="s", provider="gcp", nodes=(node,) if node else (), bucket_uri="gs://bkt",
                     ssh_private_key="", known_hosts="")


def pool(machine_type: str | None = None):
    cluster = load_stack("gke-a3mega")
    return cluster if machine_type is None else cluster.model_copy(update={"machine_type": machine_type})


def job_for(cluster, simulated: bool = False) -> dict:
    job = manifests(cluster, inventory(simulated), SPEC, gsa=GSA)[2]
    validate(job)  # sidecar, volumes and mounts are fields the Kubernetes models know
    return job


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container["env"]}


def test_a3_mega_pods_name_their_eight_networks_and_run_the_rxdm_sidecar():
    cluster = pool()
    template = job_for(cluster)["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert [i["network"] for i in interfaces[1:]] == [f"gke-a3mega-gpunet-{i}" for i in range(8)]
    assert [i["interfaceName"] for i in interfaces[1:]] == [f"eth{i}" for i in range(1, 9)]
    assert "/dev/nvidia7" in annotations["devices.gke.io/container.tcpxo-daemon"]
    pod = template["spec"]
    sidecar, = pod["initContainers"]
    assert sidecar["name"] == "tcpxo-daemon" and sidecar["restartPolicy"] == "Always"
    assert "tcpgpudmarxd" in sidecar["image"]
    assert {m["mountPath"] for m in sidecar["volumeMounts"]} == {"/usr/local/nvidia/lib64", "/hostsysfs",
                                                                "/hostprocsysfs"}
    volumes = {v["name"] for v in pod["volumes"]}
    trainer = pod["containers"][0]
    assert trainer["name"] == "trainer"
    assert {m["name"] for m in trainer["volumeMounts"]} <= volumes
    assert {m["mountPath"] for m in trainer["volumeMounts"]} >= {"/dev/aperture_devices", "/dev/shm"}


def test_a3_mega_trainer_gets_the_vm_table_nccl_settings_with_pod_interfaces():
    trainer = job_for(pool())["spec"]["template"]["spec"]["containers"][0]
    env = env_of(trainer)
    vm = gpu_networks.GPUDIRECT["a3-megagpu-8g"].nccl.env
    assert set(vm) <= set(env)  # every VM setting, none invented apart
    assert env["NCCL_FASTRAK_IFNAME"] == ",".join(f"eth{i}" for i in range(1, 9))
    assert env["NCCL_FASTRAK_CTRL_DEV"] == "eth0"
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == vm["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"]
    assert env["NCCL_SOCKET_IFNAME"] == "mine"  # the user's env wins
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    script = trainer["command"][2]
    assert script.startswith("export LD_LIBRARY_PATH=/usr/local/nvidia/lib64")
    assert "NCCL_LIB_DIR=/usr/local/nvidia/lib64 . /usr/local/nvidia/lib64/nccl-env-profile.sh; " in script
    assert script.index("nccl-env-profile.sh") < script.index("torchrun")


def test_a_simulated_pool_keeps_the_declared_parts_but_sources_no_plugin_profile():
    trainer = job_for(pool(), simulated=True)["spec"]["template"]["spec"]["containers"][0]
    assert "nccl-env-profile.sh" not in trainer["command"][2]
    assert "NCCL_FASTRAK_IFNAME" in env_of(trainer)


@pytest.mark.parametrize("machine_type", ["a3-ultragpu-8g", "a4-highgpu-8g"])
def test_rdma_pods_name_the_gvnic_and_eight_rdma_networks_and_find_the_gib_plugin(machine_type):
    cluster = pool(machine_type)
    template = job_for(cluster)["spec"]["template"]
    interfaces = json.loads(template["metadata"]["annotations"]["networking.gke.io/interfaces"])
    assert interfaces[1] == {"interfaceName": "eth1", "network": "gke-a3mega-gpunet-0"}
    assert [i["network"] for i in interfaces[2:]] == [f"gke-a3mega-rdmasub-{i}" for i in range(8)]
    assert interfaces[-1]["interfaceName"] == "eth9"
    pod = template["spec"]
    assert "initContainers" not in pod  # the gIB plugin needs no daemon
    trainer = pod["containers"][0]
    assert {m["mountPath"] for m in trainer["volumeMounts"]} == {"/usr/local/nvidia", "/usr/local/gib", "/dev/shm"}
    env = env_of(trainer)
    assert env["NCCL_IB_GID_INDEX"] == gpu_networks.GPUDIRECT[machine_type].nccl.env["NCCL_IB_GID_INDEX"]
    assert trainer["command"][2].startswith("export LD_LIBRARY_PATH=/usr/local/gib/lib64")


def test_a_pool_without_gpudirect_gets_no_networks_sidecar_or_nccl_settings():
    cluster = load_stack("gke-l4")
    job = manifests(cluster, inventory(False), SPEC, gsa=GSA)[2]
    template = job["spec"]["template"]
    assert "annotations" not in template["metadata"]
    assert "initContainers" not in template["spec"] and "volumes" not in template["spec"]
    assert not any(k.startswith("NCCL_") and k not in SPEC.env for k in env_of(template["spec"]["containers"][0]))
    assert pod_networks(cluster) == [] and network_objects(cluster) == []


def test_a_tcpx_pool_on_gke_is_refused_naming_what_is_missing():
    with pytest.raises(ConfigError, match="GPUDirect-TCPX .*a3-highgpu-8g.*tcpx-daemon"):
        manifests(pool("a3-highgpu-8g"), inventory(False), SPEC, gsa=GSA)
