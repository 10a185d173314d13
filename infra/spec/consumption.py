"""Catalog data: how each machine series' VMs may get their capacity, in trainctl's names for GCE's
provisioning models (Scheduling.provisioningModel STANDARD, SPOT, FLEX_START, RESERVATION_BOUND;
compute v1 discovery document). Beside infra/spec/catalog.py, which holds the machine types, as
gpu_networks.py holds their GPU networks; validation (provider_constraints.py) and the Pulumi
program read it.

A3 Ultra and A4 are not offered on demand: only from a reservation (the reservation-bound model, the
VM naming its reservation), flex-start or spot
(https://cloud.google.com/ai-hypercomputer/docs/consumption-models, "Comparison of consumption
options": future reservations for A4X, A4, A3 Ultra, provisioning model reservation-bound;
https://cloud.google.com/compute/docs/accelerator-optimized-machines#consumption_option_availability_by_machine_type;
Cluster Toolkit examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml: `a4h_provisioning_model:
RESERVATION_BOUND`; a3-ultragpu-8g/a3ultra-vm-deployment.yaml: "if you have a reservation, keep
RESERVATION_BOUND. IF you do NOT have a reservation, set this to SPOT"). Their reservations are
densely deployed ("Resource allocation: Dense" in the same table).
"""

from __future__ import annotations

from infra.spec import catalog

STANDARD, SPOT, FLEX_START, RESERVATION_BOUND = "standard", "spot", "flex-start", "reservation-bound"

# By machine series (the machine type without its size: a3-ultragpu-8g -> a3-ultragpu). A series
# not named here runs on demand or spot, and flex-start where catalog.FLEX_START_FAMILIES says.
CONSUMPTION_MODELS: dict[str, tuple[str, ...]] = {
    "a3-ultragpu": (RESERVATION_BOUND, FLEX_START, SPOT),
    "a4-highgpu": (RESERVATION_BOUND, FLEX_START, SPOT),
}

# Each model in a sentence ("not offered on demand"), and what a user writes to ask for it.
SAID = {STANDARD: "on demand", SPOT: "as spot VMs", FLEX_START: "flex-start", RESERVATION_BOUND: "reservation-bound"}
HOW_TO_ASK = {STANDARD: "on demand (no provisioning, spot: false)",
              SPOT: "spot: true",
              FLEX_START: "provisioning: flex-start",
              RESERVATION_BOUND: "provisioning: reservation-bound with reservation: <its name>"}


def consumption_models(machine_type: str) -> tuple[str, ...]:
    """The provisioning models GCE offers `machine_type`'s VMs with."""
    listed = CONSUMPTION_MODELS.get(machine_type.rsplit("-", 1)[0])
    if listed is not None:
        return listed
    flex = (FLEX_START,) if machine_type.split("-", 1)[0] in catalog.FLEX_START_FAMILIES else ()
    return (STANDARD, SPOT, *flex)
