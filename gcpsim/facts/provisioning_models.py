"""Which provisioning models (Compute's Scheduling.provisioningModel: STANDARD, SPOT, FLEX_START,
RESERVATION_BOUND, compute v1 discovery document) GCE offers each machine series' VMs with, and
what a model asks of the rest of the instance.

Sources:
  - https://cloud.google.com/ai-hypercomputer/docs/consumption-models ("Comparison of consumption
    options"): A4 and A3 Ultra come from future reservations (provisioning model reservation-bound),
    flex-start or spot; none of the columns is on demand;
  - https://cloud.google.com/compute/docs/accelerator-optimized-machines#consumption_option_availability_by_machine_type
    (dstackai/dstack#3100: "it makes only spot B200 instances work ... B200 are not available
    on-demand" -- "Yes", with that link);
  - GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml
    (`a4h_provisioning_model: RESERVATION_BOUND`), a3-ultragpu-8g/a3ultra-vm-deployment.yaml ("IF
    you do NOT have a reservation, set this to SPOT");
  - pulumi-gcp 10.2.0 InstanceSchedulingArgs.provisioning_model: "If this is set to
    `RESERVATION_BOUND`, the instance is bound to a specific reservation ... A `reservation_affinity`
    block with `type` set to `SPECIFIC_RESERVATION` should also be configured."
A series not in the table takes every model (flex-start's own families are not modelled here).
"""

from __future__ import annotations

STANDARD, SPOT, FLEX_START, RESERVATION_BOUND = "STANDARD", "SPOT", "FLEX_START", "RESERVATION_BOUND"

# machine series (machine type without its size) -> the provisioning models GCE creates it with
OFFERED: dict[str, tuple[str, ...]] = {
    "a3-ultragpu": (RESERVATION_BOUND, FLEX_START, SPOT),  # consumption-models page, a3ultra-vm-deployment.yaml
    "a4-highgpu": (RESERVATION_BOUND, FLEX_START, SPOT),  # consumption-models page, a4high-vm.yaml
}

# The reservation affinity a model needs (pulumi-gcp's InstanceScheduling docstring, above).
AFFINITY_REQUIRED: dict[str, str] = {RESERVATION_BOUND: "SPECIFIC_RESERVATION"}


def offered(machine_type: str) -> tuple[str, ...] | None:
    """The models GCE offers `machine_type` with; None where it offers them all."""
    return OFFERED.get(machine_type.rsplit("-", 1)[0])
