"""GkeCluster: a zonal cluster with one accelerator node pool (GPU with managed drivers, or a
TPU slice pool with a compact placement policy and its topology for multi-host slices)."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra import catalog
from infra.gcp.common import TYPE_PREFIX
from infra.spec import ClusterSpec


def kubeconfig(cluster_name: str, endpoint: str, ca: str) -> str:
    """A kubeconfig that authenticates through gke-gcloud-auth-plugin: no token in it."""
    return f"""apiVersion: v1
kind: Config
clusters:
- name: {cluster_name}
  cluster:
    server: https://{endpoint}
    certificate-authority-data: {ca}
contexts:
- name: {cluster_name}
  context: {{cluster: {cluster_name}, user: {cluster_name}}}
current-context: {cluster_name}
users:
- name: {cluster_name}
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      provideClusterInfo: true
"""


class GkeCluster(pulumi.ComponentResource):
    def __init__(self, name: str, spec: ClusterSpec, *, network: pulumi.Input[str],
                 subnet: pulumi.Input[str], tag: str, labels: dict[str, str],
                 service_account: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{TYPE_PREFIX}:GkeCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.cluster = gcp.container.Cluster(
            f"{name}-cluster", name=f"{spec.name}-gke", project=spec.project, location=spec.zone,
            network=network, subnetwork=subnet,
            remove_default_node_pool=True, initial_node_count=1,
            deletion_protection=not spec.ephemeral,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{spec.project}.svc.id.goog"),
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel="REGULAR"),
            resource_labels=labels, opts=child)
        node_config: dict = dict(
            spot=spec.spot, labels={"trainctl-stack": spec.name}, resource_labels=labels,
            tags=[tag], service_account=service_account, oauth_scopes=["cloud-platform"],
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                mode="GKE_METADATA"))
        placement = None
        if spec.tpu:
            tpu = catalog.TPUS[spec.tpu.type]
            node_config["machine_type"] = tpu.gke_machine_type
            if tpu.multi_host:
                placement = gcp.container.NodePoolPlacementPolicyArgs(
                    type="COMPACT", tpu_topology=tpu.topology)
        else:
            node_config["machine_type"] = spec.machine_type
            machine = catalog.MACHINES[spec.machine_type or ""]
            if spec.gpu:
                node_config["guest_accelerators"] = [gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                    type=spec.gpu.type, count=spec.gpu.count if not machine.bundled_gpu else machine.bundled_gpu_count,
                    gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                        gpu_driver_version="LATEST"))]
        self.pool = gcp.container.NodePool(
            f"{name}-pool", name=f"{spec.name}-pool", project=spec.project, location=spec.zone,
            cluster=self.cluster.name, node_count=spec.node_count,
            node_config=gcp.container.NodePoolNodeConfigArgs(**node_config),
            placement_policy=placement,
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=False),
            opts=child)
        config: pulumi.Output[str] = pulumi.Output.all(
            self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate,
        ).apply(lambda a: kubeconfig(a[0], a[1], a[2]))
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(config)  # type: ignore[arg-type]
        self.register_outputs({"kubeconfig": self.kubeconfig})
