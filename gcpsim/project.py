"""A simulated project, as a small YAML file describes it.

    project: my-project             # the id stacks name in gcp:project
    template: fresh                 # fresh | prepared (the default for --simulate)
    services: [compute.googleapis.com]          # enabled on top of the template's
    disabled_services: [tpu.googleapis.com]     # off, whatever the template says
    quotas:                          # limits by region ("global" for project-wide metrics)
      global: {GPUS_ALL_REGIONS: 8}
      us-central1: {NVIDIA_L4_GPUS: 8, PREEMPTIBLE_NVIDIA_L4_GPUS: 8, CPUS: 96, SSD_TOTAL_GB: 2048,
                    "GPUS_PER_GPU_FAMILY:NVIDIA_H100": 16}   # a gpu_family quota (facts/quotas.py)
    stockouts:                       # requests GCE answers ZONE_RESOURCE_POOL_EXHAUSTED
      - {zone: us-central1-a, machine_type: g2-standard-8}
      - {zone: us-central1-a, accelerator: v5p-8, tpu_words: insufficient_reserved_capacity}
    reservations:                    # specific reservations the project holds (reservations.insert)
      - {name: t4-block, zone: us-central1-a, machine_type: n1-standard-8, count: 2,
         gpu: {type: nvidia-tesla-t4, count: 2}, specific_reservation_required: true}
    caller_ip: 203.0.113.7           # the address firewalls see trainctl's SSH come from
    delays: {instance_insert: 1.0}   # seconds an operation takes
    default_delay: 0.0               # for every operation `delays` does not name

A *fresh* project is what `gcloud projects create` gives: the services Google enables on every
new project, and the default quotas of a new project (GPUS_ALL_REGIONS 0). The *prepared*
project is a fresh one whose owner has raised the accelerator quotas the stacks in stacks/ need.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from gcpsim.errors import SimulatorError


# Enabled on every new project: https://cloud.google.com/service-usage/docs/enabled-service
# ("Services enabled by default"). Checked 2026-11; the simulator refuses calls to the others
# until they are enabled.
DEFAULT_SERVICES = (
    "bigquery.googleapis.com", "bigquerymigration.googleapis.com", "bigquerystorage.googleapis.com",
    "cloudapis.googleapis.com", "clouddebugger.googleapis.com", "cloudtrace.googleapis.com",
    "datastore.googleapis.com", "logging.googleapis.com", "monitoring.googleapis.com",
    "servicemanagement.googleapis.com", "serviceusage.googleapis.com", "sql-component.googleapis.com",
    "storage-api.googleapis.com", "storage-component.googleapis.com", "storage.googleapis.com",
)

# Quotas a new project starts with where they decide whether a stack can come up at all.
# GPUS_ALL_REGIONS is 0 on new projects (https://cloud.google.com/compute/resource-usage#gpu_quota).
FRESH_QUOTAS: dict[str, dict[str, float]] = {"global": {"GPUS_ALL_REGIONS": 0}}

# What the owner of the prepared project asked for: room for every stack in stacks/.
PREPARED_QUOTAS: dict[str, dict[str, float]] = {"global": {"GPUS_ALL_REGIONS": 64}}


class Stockout(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    zone: str
    machine_type: str | None = None  # None: every machine type in the zone
    accelerator: str | None = None  # a GPU or TPU type; None: any
    spot: bool | None = None  # None: spot and on-demand alike
    # How the TPU API words the refusal of a TPU create (code 8 RESOURCE_EXHAUSTED either way):
    # "There is no more capacity in the zone ..." (hashicorp/terraform-provider-google#21243), or
    # "Insufficient reserved capacity. Contact customer support to increase your reservation."
    # for a create that used no reservation (skypilot-org/skypilot#4579). GCE's words do not vary.
    tpu_words: Literal["no_more_capacity", "insufficient_reserved_capacity"] = "no_more_capacity"


class GpuOfReservation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    count: int = Field(1, ge=1)


class Reservation(BaseModel):
    """A specific reservation, as `gcloud compute reservations create` makes one."""
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    zone: str
    machine_type: str
    count: int = Field(ge=1)
    gpu: GpuOfReservation | None = None  # attached GPUs; bundled ones come with the machine type
    specific_reservation_required: bool = False

    def body(self) -> dict[str, Any]:
        """The reservations.insert body."""
        props: dict[str, Any] = {"machineType": self.machine_type}
        if self.gpu:
            props["guestAccelerators"] = [{"acceleratorType": self.gpu.type, "acceleratorCount": self.gpu.count}]
        return {"name": self.name, "specificReservationRequired": self.specific_reservation_required,
                "specificReservation": {"count": self.count, "instanceProperties": props}}


class ProjectFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    project: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    number: int | None = None
    template: Literal["fresh", "prepared"] = "prepared"
    services: tuple[str, ...] = ()
    disabled_services: tuple[str, ...] = ()
    quotas: dict[str, dict[str, float]] = Field(default_factory=dict)
    stockouts: tuple[Stockout, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    caller_ip: str = "203.0.113.7"
    delays: dict[str, float] = Field(default_factory=dict)
    default_delay: float | None = Field(None, ge=0)  # seconds for every kind `delays` leaves out

    def project_number(self) -> int:
        if self.number is not None:
            return self.number
        # stable per id, 12 digits as real project numbers have
        return 100_000_000_000 + int(hashlib.sha256(self.project.encode()).hexdigest(), 16) % 900_000_000_000

    def initial_state(self) -> dict[str, Any]:
        """The project's entry in the world document, as created."""
        services = set(DEFAULT_SERVICES) | set(self.services)
        services -= set(self.disabled_services)
        quotas = {region: dict(limits) for region, limits in
                  (FRESH_QUOTAS if self.template == "fresh" else PREPARED_QUOTAS).items()}
        for region, limits in self.quotas.items():
            quotas.setdefault(region, {}).update(limits)
        return {"id": self.project, "number": self.project_number(), "created_at": time.time(),
                "services": {s: "ENABLED" for s in sorted(services)},
                "quotas": quotas, "stockouts": [s.model_dump() for s in self.stockouts],
                "caller_ip": self.caller_ip, "delays": dict(self.delays), "collections": {},
                **({"default_delay": self.default_delay} if self.default_delay is not None else {})}


def load_project_file(path: Path) -> ProjectFile:
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise SimulatorError(f"simulated project file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SimulatorError(f"simulated project file {path} is not YAML: {exc}") from None
    try:
        return ProjectFile.model_validate(raw)
    except ValueError as exc:
        raise SimulatorError(f"simulated project file {path}: {exc}") from None
