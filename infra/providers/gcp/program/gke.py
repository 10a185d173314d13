"""GkeCluster: a zonal, destroyable cluster on the REGULAR release channel with accelerator node
pools: one GPU pool with managed drivers, or one pool per TPU slice (a multi-host slice pool
has exactly the slice's hosts, a compact placement policy and the slice's topology)."""

from __future__ import annotations

from typing import Sequence

import pulumi
import pulumi_gcp as gcp

from infra.spec import catalog, gpu_networks
from infra.providers.gcp.program.common import TYPE_PREFIX, child_opts
from infra.providers.gcp.program.gpu_network import ExtraNic
from infra.providers.gcp.program.compute import CONSUME_TYPES, RESERVATION_NAME_KEY, max_run_seconds
from infra.spec.cluster import ClusterSpec
from infra.spec.gke_names import GKE_NAME_MAX, bounded, cluster_name, pool_layout, pool_name  # noqa: F401 (named here too)


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


# The role GKE nodes' own service account needs to write logs and metrics:
# https://cloud.google.com/kubernetes-engine/docs/how-to/service-accounts#default-gke-service-agent
NODE_ACCOUNT_ROLE = "roles/container.defaultNodeServiceAccount"


def _placement(spec: ClusterSpec) -> gcp.container.NodePoolPlacementPolicyArgs | None:
    if spec.tpu and catalog.TPUS[spec.tpu.type].multi_host:
        tpu = catalog.TPUS[spec.tpu.type]
        return gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=tpu.topology)
    if spec.placement == "compact":
        return gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
    return None


def _node_networks(extra_nics: Sequence[ExtraNic]) -> gcp.container.NodePoolNetworkConfigArgs | None:
    """A GPUDirect family's extra NICs as the pool's additional node networks (multi-networking)."""
    if not extra_nics:
        return None
    return gcp.container.NodePoolNetworkConfigArgs(additional_node_network_configs=[
        gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
            network=n.network_name, subnetwork=n.subnet_name)
        for n in extra_nics])


def _multi_networking(extra_nics: Sequence[ExtraNic]) -> dict:
    """Additional node networks need multi-networking, which needs GKE Dataplane V2."""
    return {"enable_multi_networking": True, "datapath_provider": "ADVANCED_DATAPATH"} if extra_nics else {}


def _node_config(spec: ClusterSpec, tag: str, labels: dict[str, str],
                 service_account: pulumi.Input[str]) -> dict:
    config: dict = dict(
        spot=spec.spot, labels={"trainctl-stack": spec.name}, resource_labels=labels,
        tags=[tag], service_account=service_account, oauth_scopes=["cloud-platform"],
        workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
            mode="GKE_METADATA"))
    if spec.tpu:
        config["machine_type"] = catalog.TPUS[spec.tpu.type].gke_machine_type
        return config
    config["machine_type"] = spec.machine_type
    machine = catalog.MACHINES[spec.machine_type or ""]
    if spec.gpu:
        config["guest_accelerators"] = [gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
            type=spec.gpu.type, count=machine.bundled_gpu_count if machine.bundled_gpu else spec.gpu.count,
            gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                gpu_driver_version="LATEST"))]
    if gpu_networks.gpudirect(spec.machine_type):
        config["gvnic"] = gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True)
    if spec.flex_start:  # node_config's own fields (pulumi-gcp NodePoolNodeConfigArgs)
        config["flex_start"] = True
        config["max_run_duration"] = f"{max_run_seconds(spec)}s"
    if spec.flex_start:
        # A flex-start pool consumes no reservation (Cluster Toolkit modules/compute/gke-node-pool/
        # main.tf: "enable_flex_start requires reservation_affinity.consume_reservation_type to be
        # 'NO_RESERVATION'."); the spec refuses a reservation beside flex-start.
        config["reservation_affinity"] = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="NO_RESERVATION")
    elif spec.reservation in CONSUME_TYPES:
        config["reservation_affinity"] = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type=CONSUME_TYPES[spec.reservation])
    elif spec.reservation:
        config["reservation_affinity"] = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION", key=RESERVATION_NAME_KEY, values=[spec.reservation])
    return config


def _pool_size(spec: ClusterSpec, count: int) -> dict:
    """A static size, or for a flex-start pool none: GKE's cluster autoscaler adds its nodes when
    pods wait for them, from 0 to the stack's count, in whichever zone has capacity (Cluster
    Toolkit modules/compute/gke-node-pool/main.tf: autoscaling with location_policy "ANY", and
    "enable_flex_start does not work with static_node_count"; examples/gke-consumption-options/
    dws-flex-start/README.md: "DWS Flex Start does not work with static nodes"). Total counts,
    not per-zone ones: pulumi-gcp NodePoolAutoscalingArgs total_min/max_node_count."""
    if not spec.flex_start:
        return {"node_count": count}
    return {"initial_node_count": 0, "autoscaling": gcp.container.NodePoolAutoscalingArgs(
        total_min_node_count=0, total_max_node_count=count, location_policy="ANY")}


def _management(spec: ClusterSpec) -> gcp.container.NodePoolManagementArgs:
    """A release-channel cluster upgrades its nodes itself (GKE rejects auto_upgrade=False); a
    flex-start pool's nodes are not repaired (Cluster Toolkit gke-node-pool/main.tf:
    "enable_flex_start needs node auto_repair set to false.")."""
    return gcp.container.NodePoolManagementArgs(auto_repair=not spec.flex_start, auto_upgrade=True)


class GkeCluster(pulumi.ComponentResource):
    def __init__(self, name: str, spec: ClusterSpec, *, network: pulumi.Input[str],
                 subnet: pulumi.Input[str], tag: str, labels: dict[str, str],
                 service_account: pulumi.Input[str], extra_nics: Sequence[ExtraNic] = (),
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{TYPE_PREFIX}:GkeCluster", name, None, opts)
        child = child_opts(self, opts)
        self.cluster = gcp.container.Cluster(
            f"{name}-cluster", name=cluster_name(spec), project=spec.project, location=spec.zone,
            network=network, subnetwork=subnet,
            remove_default_node_pool=True, initial_node_count=1,
            # trainctl stacks are meant to be destroyed by `trainctl down`/`pulumi destroy`.
            deletion_protection=False,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{spec.project}.svc.id.goog"),
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel="REGULAR"),
            # Pods mount an experiment's data: inputs with the Cloud Storage FUSE CSI driver.
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True)),
            resource_labels=labels, **_multi_networking(extra_nics), opts=child)
        self.pools = [
            gcp.container.NodePool(
                f"{name}-{pool}", name=pool_name(spec, pool), project=spec.project,
                location=spec.zone, cluster=self.cluster.name, **_pool_size(spec, count),
                node_config=gcp.container.NodePoolNodeConfigArgs(**_node_config(spec, tag, labels, service_account)),
                placement_policy=_placement(spec), network_config=_node_networks(extra_nics),
                management=_management(spec), opts=child)
            for pool, count in pool_layout(spec)
        ]
        # The nodes' own account may write their logs and metrics, and nothing more.
        gcp.projects.IAMMember(
            f"{name}-node-sa-role", project=spec.project, role=NODE_ACCOUNT_ROLE,
            member=pulumi.Output.from_input(service_account).apply(lambda e: f"serviceAccount:{e}"),
            opts=child)
        config: pulumi.Output[str] = pulumi.Output.all(
            self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate,
        ).apply(lambda a: kubeconfig(a[0], a[1], a[2]))
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(config)  # type: ignore[arg-type]
        self.register_outputs({"kubeconfig": self.kubeconfig})
