"""Compute Engine's read-only catalog: zones, regions, machine types, accelerator types, disk
types and the public images, from the simulator's own facts (facts/: machine_types, gpus, tpus, zones).

Choices where Google's pages are silent:
  - zones are those where facts/ places a GPU or TPU type (facts/zones.py); regions are their regions;
  - N1/N2/E2 machine types exist in every zone, a machine type with bundled GPUs (A2, A3, G2)
    only where its GPU exists;
  - public images: one image per family the program and common stack files name; the image's
    name is the family's with a "-simulated" suffix (only families and these names resolve).
"""

from __future__ import annotations

from typing import Any

from gcpsim import routes
from gcpsim.apis.compute_common import link, list_response, region_of, stable_id
from gcpsim.errors import not_found
from gcpsim.facts import zones as zone_facts
from gcpsim.facts.gpus import GPUS, Gpu
from gcpsim.facts.machine_types import MACHINE_TYPES, TPU_HOSTS, MachineShape
from gcpsim.facts.tpus import TPUS
from gcpsim.routes import Call, handles

CREATED = "1969-12-31T16:00:00.000-08:00"  # what GCE shows for its own zones and regions

ZONES: tuple[str, ...] = zone_facts.ZONES
REGIONS: tuple[str, ...] = tuple(sorted({region_of(z) for z in ZONES}))

DISK_TYPES = {"pd-standard": ("Standard Persistent Disk", "10GB-65536GB", "500"),
              "pd-balanced": ("Balanced Persistent Disk", "10GB-65536GB", "100"),
              "pd-ssd": ("SSD Persistent Disk", "10GB-65536GB", "100"),
              "pd-extreme": ("Extreme Persistent Disk", "500GB-65536GB", "1000"),
              # Sizes 4 GiB to 64 TiB (https://cloud.google.com/compute/docs/disks/hyperdisks);
              # the boot disk of A3 Ultra and A4, which take no Persistent Disk.
              "hyperdisk-balanced": ("Hyperdisk Balanced", "4GB-65536GB", "100")}

# project -> family -> disk size (GB): the families trainctl's program and stack files use.
PUBLIC_IMAGES: dict[str, dict[str, int]] = {
    "ubuntu-os-cloud": {"ubuntu-2204-lts": 10, "ubuntu-2404-lts-amd64": 10, "ubuntu-2004-lts": 10},
    "debian-cloud": {"debian-12": 10, "debian-11": 10},
    "cos-cloud": {"cos-stable": 10},
    "deeplearning-platform-release": {"common-cu128-ubuntu-2204-nvidia-570": 50,
                                      "common-cu124-debian-11-py310": 50, "common-cpu": 50},
}
# Google's image projects: any caller may read their images (server.py admits them).
routes.PUBLIC_PROJECTS.update({p: ("compute.images.",) for p in PUBLIC_IMAGES})


# -- lookups the other modules use -------------------------------------------------------------

def zone_exists(zone: str) -> bool:
    return zone in ZONES


def machine_type(zone: str, name: str) -> MachineShape | None:
    m = MACHINE_TYPES.get(name) or _tpu_host(zone, name)
    if m is None or zone not in ZONES:
        return None
    if m.bundled_gpu and zone not in GPUS[m.bundled_gpu].zones:
        return None
    return m


def _tpu_host(zone: str, name: str) -> MachineShape | None:
    """A TPU host's VM shape (GKE TPU pools' nodes), where a TPU type it carries is offered."""
    shape = TPU_HOSTS.get(name)
    if shape is None or not any(t.gke_machine_type == name and zone in t.zones for t in TPUS.values()):
        return None
    return shape


def accelerator_type(zone: str, name: str) -> Gpu | None:
    g = GPUS.get(name)
    return g if g is not None and zone in g.zones else None


def image(project: str, name: str) -> dict[str, Any] | None:
    family = name.removesuffix("-simulated")
    if not name.endswith("-simulated") or family not in PUBLIC_IMAGES.get(project, {}):
        return None
    return _image(project, family)


def image_from_family(project: str, family: str) -> dict[str, Any] | None:
    return _image(project, family) if family in PUBLIC_IMAGES.get(project, {}) else None


def _image(project: str, family: str) -> dict[str, Any]:
    name = f"{family}-simulated"
    return {"kind": "compute#image", "id": stable_id(project, family), "name": name,
            "family": family, "status": "READY", "sourceType": "RAW", "architecture": "X86_64",
            "diskSizeGb": str(PUBLIC_IMAGES[project][family]), "creationTimestamp": CREATED,
            "description": f"{family} (simulated: trainctl's GCP simulator boots every image as a local node)",
            "selfLink": link(f"projects/{project}/global/images/{name}")}


# -- zones and regions ------------------------------------------------------------------------

def _zone(project: str, zone: str) -> dict[str, Any]:
    region = region_of(zone)
    return {"kind": "compute#zone", "id": str(2000 + ZONES.index(zone)), "name": zone,
            "description": zone, "status": "UP", "creationTimestamp": CREATED,
            "region": link(f"projects/{project}/regions/{region}"),
            "selfLink": link(f"projects/{project}/zones/{zone}"),
            "availableCpuPlatforms": ["Intel Cascade Lake", "AMD Milan"], "supportsPzs": False}


def _zone_or_404(call: Call) -> str:
    zone = call.params["zone"]
    if zone not in ZONES:
        raise not_found(f"projects/{call.project_id}/zones/{zone}")
    return zone


@handles("compute.zones.get")
def get_zone(call: Call) -> Any:
    return _zone(call.project_id, _zone_or_404(call))


@handles("compute.zones.list")
def list_zones(call: Call) -> Any:
    p = call.project_id
    return list_response(call, "compute#zoneList", f"projects/{p}/zones", [_zone(p, z) for z in ZONES])


def region_doc(project: str, region: str, quotas: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "compute#region", "id": str(1000 + REGIONS.index(region)), "name": region,
            "description": region, "status": "UP", "creationTimestamp": CREATED,
            "zones": [link(f"projects/{project}/zones/{z}") for z in ZONES if region_of(z) == region],
            "quotas": quotas, "selfLink": link(f"projects/{project}/regions/{region}")}


# -- machine types, accelerator types, disk types ---------------------------------------------

def _machine_type(project: str, zone: str, m: MachineShape) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "compute#machineType", "id": stable_id(m.name), "name": m.name,
        "description": f"{m.vcpus} vCPUs, {m.memory_gb:g} GB RAM", "guestCpus": m.vcpus,
        "memoryMb": int(m.memory_gb * 1024), "maximumPersistentDisks": 128,
        "maximumPersistentDisksSizeGb": "263168", "zone": zone, "isSharedCpu": m.shared_cpu,
        "creationTimestamp": CREATED, "selfLink": link(f"projects/{project}/zones/{zone}/machineTypes/{m.name}")}
    if m.bundled_gpu:
        out["accelerators"] = [{"guestAcceleratorType": m.bundled_gpu, "guestAcceleratorCount": m.bundled_gpu_count}]
    return out


@handles("compute.machineTypes.get")
def get_machine_type(call: Call) -> Any:
    zone, name = _zone_or_404(call), call.params["machineType"]
    m = machine_type(zone, name)
    if m is None:
        raise not_found(f"projects/{call.project_id}/zones/{zone}/machineTypes/{name}")
    return _machine_type(call.project_id, zone, m)


@handles("compute.machineTypes.list")
def list_machine_types(call: Call) -> Any:
    zone, p = _zone_or_404(call), call.project_id
    found = [_machine_type(p, zone, m) for m in MACHINE_TYPES.values() if machine_type(zone, m.name)]
    return list_response(call, "compute#machineTypeList", f"projects/{p}/zones/{zone}/machineTypes", found)


def _accelerator_type(project: str, zone: str, g: Gpu) -> dict[str, Any]:
    return {"kind": "compute#acceleratorType", "id": stable_id(g.name), "name": g.name,
            "description": f"NVIDIA {g.label}", "zone": link(f"projects/{project}/zones/{zone}"),
            "maximumCardsPerInstance": max(g.attachable_counts or (8,)), "creationTimestamp": CREATED,
            "selfLink": link(f"projects/{project}/zones/{zone}/acceleratorTypes/{g.name}")}


@handles("compute.acceleratorTypes.get")
def get_accelerator_type(call: Call) -> Any:
    zone, name = _zone_or_404(call), call.params["acceleratorType"]
    g = accelerator_type(zone, name)
    if g is None:
        raise not_found(f"projects/{call.project_id}/zones/{zone}/acceleratorTypes/{name}")
    return _accelerator_type(call.project_id, zone, g)


@handles("compute.acceleratorTypes.list")
def list_accelerator_types(call: Call) -> Any:
    zone, p = _zone_or_404(call), call.project_id
    found = [_accelerator_type(p, zone, g) for g in GPUS.values() if zone in g.zones]
    return list_response(call, "compute#acceleratorTypeList", f"projects/{p}/zones/{zone}/acceleratorTypes", found)


def _disk_type(project: str, zone: str, name: str) -> dict[str, Any]:
    description, sizes, default = DISK_TYPES[name]
    return {"kind": "compute#diskType", "id": str(3000 + list(DISK_TYPES).index(name)), "name": name,
            "description": description, "validDiskSize": sizes, "defaultDiskSizeGb": default,
            "zone": link(f"projects/{project}/zones/{zone}"), "creationTimestamp": CREATED,
            "selfLink": link(f"projects/{project}/zones/{zone}/diskTypes/{name}")}


@handles("compute.diskTypes.get")
def get_disk_type(call: Call) -> Any:
    zone, name = _zone_or_404(call), call.params["diskType"]
    if name not in DISK_TYPES:
        raise not_found(f"projects/{call.project_id}/zones/{zone}/diskTypes/{name}")
    return _disk_type(call.project_id, zone, name)


@handles("compute.diskTypes.list")
def list_disk_types(call: Call) -> Any:
    zone, p = _zone_or_404(call), call.project_id
    return list_response(call, "compute#diskTypeList", f"projects/{p}/zones/{zone}/diskTypes",
                         [_disk_type(p, zone, n) for n in DISK_TYPES])


# -- public images ----------------------------------------------------------------------------

@handles("compute.images.get")
def get_image(call: Call) -> Any:
    project, name = call.params["project"], call.params["image"]
    found = image(project, name)
    if found is None:
        raise not_found(f"projects/{project}/global/images/{name}")
    return found


@handles("compute.images.getFromFamily")
def get_image_from_family(call: Call) -> Any:
    project, family = call.params["project"], call.params["family"]
    found = image_from_family(project, family)
    if found is None:
        raise not_found(f"projects/{project}/global/images/family/{family}")
    return found


@handles("compute.images.list")
def list_images(call: Call) -> Any:
    project = call.params["project"]
    found = [_image(project, f) for f in PUBLIC_IMAGES.get(project, {})]
    return list_response(call, "compute#imageList", f"projects/{project}/global/images", found)
