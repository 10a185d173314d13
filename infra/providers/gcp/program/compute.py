"""GpuVmGroup: N identical VMs with GPUs — attached (N1) or bundled (A2, A3, G2)."""

from __future__ import annotations

from typing import Mapping, Sequence

import pulumi
import pulumi_gcp as gcp

from infra.spec import catalog, gpu_networks
from infra.providers.gcp.program.common import TYPE_PREFIX, child_opts
from infra.providers.gcp.program.gpu_network import ExtraNic
from infra.spec.cluster import ClusterSpec


def scheduling(spec: ClusterSpec) -> gcp.compute.InstanceSchedulingArgs:
    if spec.flex_start:
        return flex_start_scheduling(spec)
    if spec.spot:
        return gcp.compute.InstanceSchedulingArgs(
            provisioning_model="SPOT", preemptible=True, automatic_restart=False,
            # GPUs cannot live-migrate. A reclaimed spot VM is deleted by default (not left stopped
            # and billed for its disk); STOP keeps the disk for a restart.
            on_host_maintenance="TERMINATE", instance_termination_action=spec.instance_termination_action)
    # RESERVATION_BOUND: the VM lives on the reservation its affinity names (reservation_affinity);
    # it restarts there, as Cluster Toolkit's a4high-vm.yaml declares (automatic_restart: true).
    return gcp.compute.InstanceSchedulingArgs(
        provisioning_model="RESERVATION_BOUND" if spec.reservation_bound else "STANDARD", automatic_restart=True,
        on_host_maintenance="TERMINATE" if spec.gpu else "MIGRATE")


def flex_start_scheduling(spec: ClusterSpec) -> gcp.compute.InstanceSchedulingArgs:
    """GCE's FLEX_START model as pulumi-gcp's InstanceScheduling docstring states it: no automatic
    restart, termination action DELETE, a max run duration (the stack's TTL: the VMs go when the
    stack would be reaped anyway)."""
    return gcp.compute.InstanceSchedulingArgs(
        provisioning_model="FLEX_START", automatic_restart=False, on_host_maintenance="TERMINATE",
        instance_termination_action="DELETE",
        max_run_duration=gcp.compute.InstanceSchedulingMaxRunDurationArgs(seconds=max_run_seconds(spec)))


def max_run_seconds(spec: ClusterSpec) -> int:
    return int(spec.ttl_hours * 3600)


def waiting_for_capacity(spec: ClusterSpec, opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    """The deadline as the VMs' create timeout: the provider waits that long for the insert
    operation (resource_compute_instance.go, ComputeOperationWaitTime with TimeoutCreate), what
    `pulumi up` by hand honours too. It is not the wait for the grant: the provider's wait for
    RUNNING fails at once on PENDING, and trainctl waits for the grant itself (flex_start.py)."""
    if not spec.flex_start:
        return opts
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
        custom_timeouts=pulumi.CustomTimeouts(create=f"{round(spec.flex_start_deadline_minutes * 60)}s")))


def guest_accelerators(spec: ClusterSpec) -> list[gcp.compute.InstanceGuestAcceleratorArgs] | None:
    machine = catalog.MACHINES[spec.machine_type or ""]
    if not spec.gpu or machine.bundled_gpu:
        return None  # bundled GPUs come with the machine type: send no accelerator list at all
    return [gcp.compute.InstanceGuestAcceleratorArgs(type=spec.gpu.type, count=spec.gpu.count)]


# The key a SPECIFIC_RESERVATION affinity names a reservation by (pulumi-gcp's
# InstanceReservationAffinitySpecificReservationArgs.key docstring; Compute's ReservationAffinity).
RESERVATION_NAME_KEY = "compute.googleapis.com/reservation-name"
# Compute's ReservationAffinity.consumeReservationType for the `reservation` keywords.
CONSUME_TYPES = {"any": "ANY_RESERVATION", "none": "NO_RESERVATION"}


def reservation_affinity(spec: ClusterSpec) -> gcp.compute.InstanceReservationAffinityArgs | None:
    """Which reserved capacity the VMs may run on; unset: none sent, GCE's default (any matching).
    Flex-start VMs consume none, as Google's tooling declares them (Cluster Toolkit
    schedmd-slurm-gcp-v6-controller/partition.tf: FLEX_START with reservation_affinity NO_RESERVATION)."""
    if spec.flex_start:
        return gcp.compute.InstanceReservationAffinityArgs(type=CONSUME_TYPES["none"])
    if spec.reservation is None:
        return None
    if spec.reservation in CONSUME_TYPES:
        return gcp.compute.InstanceReservationAffinityArgs(type=CONSUME_TYPES[spec.reservation])
    return gcp.compute.InstanceReservationAffinityArgs(
        type="SPECIFIC_RESERVATION", specific_reservation=gcp.compute.InstanceReservationAffinitySpecificReservationArgs(
            key=RESERVATION_NAME_KEY, values=[spec.reservation]))


def network_interfaces(spec: ClusterSpec, subnet: pulumi.Input[str],
                       extra_nics: Sequence[ExtraNic] = ()) -> list[gcp.compute.InstanceNetworkInterfaceArgs]:
    """nic0 on the stack's subnet (the only one with an external address), then the GPUDirect
    family's NICs on their own networks; gVNIC on every NIC of such a family."""
    gpudirect = bool(extra_nics)
    first = gcp.compute.InstanceNetworkInterfaceArgs(
        subnetwork=subnet, nic_type="GVNIC" if gpudirect else None,
        access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()]
        if spec.network.external_ips else [])
    return [first, *(gcp.compute.InstanceNetworkInterfaceArgs(subnetwork=n.subnet, nic_type=n.nic_type)
                     for n in extra_nics)]


def node_name(spec: ClusterSpec, index: int) -> str:
    return f"{spec.name}-node-{index}"


class GpuVmGroup(pulumi.ComponentResource):
    """One worker pool's VMs (`spec` is the pool as a one-group spec, see ClusterSpec.groups);
    their node indexes start at `first`, so names and ranks run on across pools."""

    def __init__(self, name: str, spec: ClusterSpec, *, subnet: pulumi.Input[str], tag: str,
                 metadata: dict[str, str], labels: dict[str, str],
                 service_account: pulumi.Input[str], startup_script: str | None = None,
                 first: int = 0, role: str | None = None, extra_nics: Sequence[ExtraNic] = (),
                 placement: pulumi.Input[str] | None = None,
                 node_metadata: Mapping[int, dict[str, str]] | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{TYPE_PREFIX}:GpuVmGroup", name, None, opts)
        child = child_opts(self, opts)
        image = spec.image or (catalog.IMAGE_GPU_DEFAULT if spec.gpu else catalog.IMAGE_CPU_DEFAULT)
        meta = dict(metadata)
        if startup_script:
            meta["startup-script"] = startup_script
        self.first = first
        self.instances = [
            gcp.compute.Instance(
                f"{name}-{i}",
                name=node_name(spec, i),
                project=spec.project,
                zone=spec.zone,
                machine_type=spec.machine_type,
                boot_disk=gcp.compute.InstanceBootDiskArgs(
                    auto_delete=True,
                    initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                        image=image, size=spec.boot_disk_gb, type=gpu_networks.boot_disk_type(spec.machine_type))),
                network_interfaces=network_interfaces(spec, subnet, extra_nics),
                resource_policies=placement,
                guest_accelerators=guest_accelerators(spec),
                scheduling=scheduling(spec),
                reservation_affinity=reservation_affinity(spec),
                metadata={**meta, **(node_metadata or {}).get(i, {})},
                tags=[tag],
                labels={**labels, "trainctl-rank": str(i), **({"trainctl-role": role} if role else {})},
                service_account=gcp.compute.InstanceServiceAccountArgs(
                    email=service_account, scopes=["cloud-platform"]),
                allow_stopping_for_update=True,
                opts=waiting_for_capacity(spec, child),
            )
            for i in range(first, first + spec.node_count)
        ]
        self.register_outputs({"names": [inst.name for inst in self.instances]})
