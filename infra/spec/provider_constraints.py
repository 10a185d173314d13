"""Each provider's constraints on a cluster, and the defaults they settle (node count, processes
per node, a machine type's bundled GPU, each pool's machines), checked against the catalog while
a ClusterSpec is resolved. Apart from the model because this is where the catalog's machine
types, GPUs and TPUs meet a cluster's fields; ClusterSpec only says when the checks run."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any, Callable

from infra.spec import catalog, gpu_networks
from infra.spec.cluster_sections import GpuRequest
from infra.spec.model import resolve
from infra.spec.placement import resolve_placement
from infra.spec.zone_choice import check_zone_choice

if TYPE_CHECKING:  # ClusterSpec runs these checks while it validates itself
    from infra.spec.cluster import ClusterSpec


def check_provider(spec: ClusterSpec) -> dict[str, Any]:
    """The checks of the provider `spec` names; the defaults they settle, for the spec to take.
    Chosen by the provider field because the spec layer sits below the providers and cannot ask
    their Capabilities, and a stack must be refused while it is read, before anything exists."""
    return PROVIDER_CHECKS[spec.provider](spec)


def check_local(spec: ClusterSpec) -> dict[str, Any]:
    """The local stack: namespaces of this machine, without accelerators, a few of them."""
    if any(p.gpu for p in spec.pools):
        raise ValueError("the local stack has no accelerators: remove gpu from the pools")
    if spec.gpu or spec.tpu:
        raise ValueError("the local stack has no accelerators: remove gpu/tpu "
                         "(or use a gcp stack)")
    if spec.kind != "vm":
        raise ValueError(f"kind {spec.kind!r} needs provider gcp; the local stack has kind 'vm'")
    if spec.reservation is not None or any(p.reservation for p in spec.pools):
        raise ValueError("the local stack has no reserved capacity: remove reservation")
    if spec.placement == "compact":
        raise ValueError("placement: compact places GCE VMs; the local stack's nodes are namespaces on "
                         "this machine: remove placement")
    if spec.zones or spec.region:
        raise ValueError("the local stack has no zones to choose from: remove zones/region")
    if spec.flex_start:
        raise ValueError("the local stack has no flex-start capacity (a GCE provisioning model): "
                         "remove provisioning, or use a gcp stack")
    _check_stand_in_machines(spec)
    nodes = sum(p.count for p in spec.pools) if spec.pools else spec.nodes or 2
    if nodes > catalog.LOCAL_MAX_NODES:
        raise ValueError(f"nodes {nodes} is more than the local stack supports "
                         f"(1-{catalog.LOCAL_MAX_NODES})")
    return {"nodes": nodes, "processes_per_node": spec.processes_per_node or 1}


def _check_stand_in_machines(spec: ClusterSpec) -> None:
    """A local node runs on this machine whatever it names; a machine type it names is the GCE
    machine it stands in for, which prices it (budgets can be tried here), so it must exist."""
    named = [("", spec.machine_type), *((f"pools[{p.role}]: ", p.machine_type) for p in spec.pools)]
    for where, machine_type in named:
        if machine_type and machine_type not in catalog.MACHINES:
            raise ValueError(f"{where}unknown machine_type {machine_type!r} (on the local stack it prices "
                             f"the nodes as that GCE machine); valid: {catalog.choices(catalog.MACHINES, limit=20)}")


def check_gcp(spec: ClusterSpec) -> dict[str, Any]:
    """A GCP stack: its project and zone, who may reach SSH, and the machines of its kind."""
    if not spec.project:
        raise ValueError("project is required for provider gcp (trainctl:project or gcp:project)")
    resolve(spec, check_zone_choice(spec))  # the zone every later check reads
    if not spec.zone:
        raise ValueError("zone is required for provider gcp (trainctl:zone or gcp:zone, "
                         "or trainctl:zones / trainctl:region to fail over between zones)")
    if spec.kind != "gke" and not spec.ssh.source_ranges:
        raise ValueError("ssh.source_ranges is required for provider gcp: the CIDRs allowed to "
                         "reach port 22 (there is no 0.0.0.0/0 default)")
    _check_reservations(spec)
    if spec.idle_minutes is not None and spec.kind != "vm":
        raise ValueError(f"idle_minutes is watched on local stacks and GCP VM stacks only (kind vm; this "
                         f"stack is kind {spec.kind}); remove it and let ttl_hours bound the stack, "
                         "which the reaper enforces")
    if spec.kind == "tpu" or (spec.kind == "gke" and spec.tpu):
        updates = _check_tpu(spec)
    elif spec.pools:
        updates = _check_pool_machines(spec)
    else:
        updates = _check_gpu_machine(spec)
    _check_gpudirect(spec, updates.get("machine_type", spec.machine_type))
    nodes = updates.get("nodes") or spec.nodes or sum(p.count for p in spec.pools)
    sized = spec.model_copy(update={"nodes": nodes,
                                    "machine_type": updates.get("machine_type", spec.machine_type)})
    updates["placement"] = resolve_placement(sized)
    if spec.flex_start:
        _check_flex_start(spec, updates.get("machine_type", spec.machine_type))
        _check_gke_flex_start_reservation(spec)
    if spec.processes_per_node is None:
        gpu = updates.get("gpu", spec.gpu)
        # one process per GPU; one per TPU host, which drives all its chips
        updates["processes_per_node"] = gpu.count if gpu and not spec.tpu else 1
    return updates


def _check_gpudirect(spec: ClusterSpec, machine_type: str | None) -> None:
    """The stack's GPUDirect networks serve one family, and their ranges stay clear of nic0's."""
    types = {p.machine_type or machine_type for p in spec.pools} if spec.pools else {machine_type}
    families = sorted(t for t in types if t and gpu_networks.gpudirect(t))
    if len({gpu_networks.GPUDIRECT[t].name for t in families}) > 1:
        raise ValueError(f"pools: {' and '.join(families)} need different GPU networks; one stack serves one "
                         "GPUDirect family: give the others a stack of their own")
    extra = ipaddress.ip_network(gpu_networks.EXTRA_NETWORKS_RANGE)
    if families and ipaddress.ip_network(spec.network.subnet_cidr).overlaps(extra):
        raise ValueError(f"network.subnet_cidr {spec.network.subnet_cidr} overlaps {extra}, where the "
                         f"{families[0]} GPU networks' subnets are: pick a range outside it (e.g. 10.128.0.0/20)")


def _check_reservations(spec: ClusterSpec) -> None:
    """Where a reservation can be consumed: GCE VMs only for now, and never by Spot VMs ("You can't
    consume a reservation to create ... Spot VMs or preemptible instances",
    https://cloud.google.com/compute/docs/instances/reservations-consume#limitations)."""
    wanted = [("", spec.reservation, spec.spot)] + [(f"pools[{p.role}]: ", p.reservation, bool(p.spot))
                                                    for p in spec.pools]
    for where, reservation, spot in wanted:
        if reservation in (None, "none"):
            continue
        if spec.kind == "gke" and spec.tpu:
            raise ValueError(f"{where}reservation applies to GPU VMs, GKE GPU node pools and queued TPU VMs; "
                             "GKE TPU pools cannot consume one through trainctl yet: remove reservation")
        if spec.kind == "tpu" and not (spec.tpu and spec.tpu.queued):
            raise ValueError(f"{where}reservation on a TPU VM is requested through a queued resource "
                             "(its reservationName): set tpu.queued: true, or remove reservation")
        if spot:
            raise ValueError(f"{where}reservation {reservation!r} with spot: GCE cannot run Spot VMs on reserved "
                             "capacity (cloud.google.com/compute/docs/instances/reservations-consume); "
                             "set spot: false, or reservation: none")


def _check_flex_start(spec: ClusterSpec, machine_type: str | None) -> None:
    """What GCE takes as a flex-start VM (cloud.google.com/compute/docs/instances/about-flex-start-vms):
    one provisioning model per VM (not spot too), a run of at most 7 days (the stack's TTL becomes
    the VMs' max run duration), accelerator-optimized machine families. TPUs wait for capacity
    through queued resources instead."""
    if spec.kind == "tpu" or spec.tpu:
        raise ValueError("provisioning 'flex-start' applies to GPU VMs and GKE GPU node pools; TPUs wait for "
                         "capacity as queued resources: remove provisioning")
    if spec.has_spot:
        raise ValueError("provisioning 'flex-start' with spot: a VM has one provisioning model (FLEX_START or "
                         "SPOT); set spot: false, or remove provisioning")
    if spec.ttl_hours > catalog.FLEX_START_MAX_RUN_HOURS:
        raise ValueError(f"ttl_hours {spec.ttl_hours:g} with provisioning 'flex-start': flex-start VMs run at "
                         f"most {catalog.FLEX_START_MAX_RUN_HOURS} hours (7 days), and the TTL is their max run "
                         f"duration; set ttl_hours to {catalog.FLEX_START_MAX_RUN_HOURS} or less")
    machines = [(f"pools[{p.role}]: ", p.machine_type) for p in spec.pools] or [("", machine_type)]
    for where, name in machines:
        if name and name.split("-", 1)[0] not in catalog.FLEX_START_FAMILIES:
            raise ValueError(f"{where}machine_type {name} cannot be a flex-start VM: GCE offers flex-start on "
                             f"the {', '.join(catalog.FLEX_START_FAMILIES)} machine families; pick one "
                             "(e.g. g2-standard-8, a2-highgpu-1g), or remove provisioning")


def _check_gke_flex_start_reservation(spec: ClusterSpec) -> None:
    """A flex-start GKE node pool consumes no reservation (Cluster Toolkit modules/compute/
    gke-node-pool/main.tf: "enable_flex_start requires reservation_affinity.consume_reservation_type
    to be 'NO_RESERVATION'.")."""
    if spec.kind != "gke":
        return
    for where, reservation in [("", spec.reservation), *((f"pools[{p.role}]: ", p.reservation) for p in spec.pools)]:
        if reservation not in (None, "none"):
            raise ValueError(f"{where}reservation {reservation!r} with provisioning 'flex-start': a flex-start GKE "
                             "node pool consumes no reservation (NO_RESERVATION); set reservation: none, or "
                             "remove provisioning")


def _check_slices(spec: ClusterSpec) -> None:
    """Multislice (tpu.slices > 1): on TPU VMs through a queued resource; on GKE as one multi-host
    slice node pool per slice, the only pools GKE runs Multislice on
    (https://cloud.google.com/kubernetes-engine/docs/how-to/tpu-multislice, "Multislice only
    supports multi-host TPU slice node pools")."""
    assert spec.tpu is not None
    if spec.tpu.slices == 1:
        return
    tpu = catalog.TPUS[spec.tpu.type]
    if spec.kind == "gke" and not tpu.multi_host:
        raise ValueError(f"tpu.slices: {spec.tpu.slices} of {tpu.name} on GKE: GKE runs Multislice on multi-host "
                         f"TPU slice node pools only, and {tpu.name} is a single host; pick a multi-host type "
                         "(e.g. v5litepod-16, v4-16), or kind: tpu with tpu.queued: true")
    if spec.kind == "tpu" and not spec.tpu.queued:
        raise ValueError(f"tpu.slices: {spec.tpu.slices} needs tpu.queued: true: Cloud TPU grants the slices of "
                         "a multislice together only through a queued resource; set tpu.queued: true, "
                         "or remove tpu.slices")


def _check_tpu(spec: ClusterSpec) -> dict[str, Any]:
    if not spec.tpu:
        raise ValueError("kind 'tpu' needs a tpu section (type, runtime_version)")
    if spec.gpu:
        raise ValueError("a cluster has either gpu or tpu, not both")
    tpu = catalog.TPUS[spec.tpu.type]
    if spec.zone not in tpu.zones:
        raise ValueError(f"TPU type {tpu.name} is not offered in zone {spec.zone!r}; "
                         f"valid zones: {catalog.choices(tpu.zones)}")
    if spec.tpu.queued and spec.kind != "tpu":
        raise ValueError("tpu.queued applies to TPU VM stacks (kind: tpu); a GKE TPU pool gets its "
                         "nodes from GKE: remove tpu.queued")
    _check_slices(spec)
    if spec.kind == "tpu":
        nodes = tpu.hosts * spec.tpu.slices
        if spec.nodes not in (None, nodes):
            slices = f"{spec.tpu.slices} slices of " if spec.tpu.slices > 1 else ""
            raise ValueError(f"nodes {spec.nodes} does not match {slices}TPU type {tpu.name}, which "
                             f"has {nodes} host(s); leave nodes out or set {nodes}")
    elif spec.tpu.slices > 1:  # GKE multislice: every slice's hosts, a node pool per slice
        nodes = tpu.hosts * spec.tpu.slices
        if spec.nodes not in (None, nodes):
            raise ValueError(f"nodes {spec.nodes} does not match {spec.tpu.slices} slices of TPU type {tpu.name}, "
                             f"which have {nodes} host(s); leave nodes out or set {nodes}")
    else:  # GKE: nodes = number of slices' hosts in the pool
        hosts = tpu.hosts
        nodes = spec.nodes or hosts
        if nodes % hosts:
            raise ValueError(f"nodes {nodes} must be a multiple of {hosts} (hosts per "
                             f"{tpu.name} slice)")
    if spec.machine_type is not None and spec.kind == "tpu":
        raise ValueError("machine_type does not apply to TPU VMs; the TPU type sets it")
    return {"nodes": nodes}


def _check_pool_machines(spec: ClusterSpec) -> dict[str, Any]:
    """Each pool's machines, checked as a one-group cluster's are; the cluster's own
    machine_type and gpu are the pools' defaults."""
    if spec.tpu:
        raise ValueError(f"tpu needs kind 'tpu' or 'gke' (got kind {spec.kind!r})")
    for pool in spec.pools:
        machine_type = pool.machine_type or spec.machine_type
        gpu = pool.gpu if pool.machine_type else pool.gpu or spec.gpu
        where = f"pools[{pool.role}]: "
        try:
            derived = _check_gpu_machine(spec, machine_type, gpu)
        except ValueError as exc:
            raise ValueError(where + str(exc)) from None
        resolve(pool, {"machine_type": machine_type, "gpu": derived.get("gpu", gpu)})
    chief = spec.pools[0]
    return {"machine_type": chief.machine_type, "gpu": chief.gpu}


def _check_gpu_machine(spec: ClusterSpec, machine_type: str | None = None,
                       gpu_request: GpuRequest | None = None) -> dict[str, Any]:
    if machine_type is None:
        machine_type, gpu_request = spec.machine_type, spec.gpu
    if spec.tpu:
        raise ValueError(f"tpu needs kind 'tpu' or 'gke' (got kind {spec.kind!r})")
    if not machine_type:
        raise ValueError(f"machine_type is required for kind {spec.kind!r}")
    machine = catalog.MACHINES.get(machine_type)
    if machine is None:
        raise ValueError(f"unknown machine_type {machine_type!r}; "
                         f"valid: {catalog.choices(catalog.MACHINES, limit=20)}")
    updates: dict[str, Any] = {"nodes": spec.nodes or 1}
    requested = gpu_request
    if machine.bundled_gpu:
        if requested and (requested.type != machine.bundled_gpu
                         or requested.count != machine.bundled_gpu_count):
            raise ValueError(
                f"machine_type {machine.name} comes with {machine.bundled_gpu_count} x "
                f"{machine.bundled_gpu}; gpu {requested.count} x {requested.type} does not fit "
                "(leave gpu out for bundled machine types)")
        gpu_request = updates["gpu"] = GpuRequest(type=machine.bundled_gpu,
                                                  count=machine.bundled_gpu_count)
    elif requested:
        _check_attachable(machine, requested)
    if gpu_request:
        gpu = catalog.GPUS[gpu_request.type]
        if spec.zone not in gpu.zones:
            raise ValueError(f"GPU {gpu.name} is not offered in zone {spec.zone!r}; "
                             f"valid zones: {catalog.choices(gpu.zones)}")
    return updates


def _check_attachable(machine: catalog.MachineType, requested: GpuRequest) -> None:
    """A GPU attached to a machine type that does not bundle one: only to the families that
    take them, in the counts GCE offers, within the vCPUs each count allows."""
    gpu = catalog.GPUS[requested.type]
    if machine.family not in catalog.ATTACHABLE_GPU_FAMILIES or not gpu.attachable_counts:
        bundles = sorted(m.name for m in catalog.MACHINES.values()
                         if m.bundled_gpu == gpu.name)
        hint = (f"{gpu.name} comes only bundled: use {catalog.choices(bundles)}" if bundles
                else "attach it to an n1 machine type")
        raise ValueError(f"GPU {gpu.name} cannot be attached to {machine.name}; {hint}")
    if requested.count not in gpu.attachable_counts:
        raise ValueError(f"gpu.count {requested.count} is not attachable for {gpu.name}; "
                         f"valid: {', '.join(map(str, gpu.attachable_counts))}")
    limit = catalog.N1_MAX_VCPUS_PER_GPU_COUNT.get(gpu.name, {}).get(requested.count)
    if limit is not None and machine.vcpus > limit:
        raise ValueError(f"{machine.name} has {machine.vcpus} vCPUs, more than "
                         f"{requested.count} x {gpu.name} allows ({limit})")


PROVIDER_CHECKS: dict[str, Callable[[ClusterSpec], dict[str, Any]]] = {
    "local": check_local, "gcp": check_gcp}
