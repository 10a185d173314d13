"""How a VM gets its capacity: a provisioning model its machine series is offered with (A3 Ultra and
A4: RESERVATION_BOUND, FLEX_START or SPOT, never STANDARD; infra/spec/consumption.py), a
RESERVATION_BOUND VM bound to the reservation it names, a flex-start VM on no reservation."""

from __future__ import annotations

from typing import Any, Iterator

from infra.spec import consumption
from policy.declared import T_INSTANCE, Resource, mapping

# Compute's Scheduling.provisioningModel values, in trainctl's names (infra/spec/consumption.py).
MODELS = {"STANDARD": consumption.STANDARD, "SPOT": consumption.SPOT, "FLEX_START": consumption.FLEX_START,
          "RESERVATION_BOUND": consumption.RESERVATION_BOUND}


def _model(scheduling: Any) -> str:
    s = mapping(scheduling)
    default = "SPOT" if s.get("preemptible") is True else "STANDARD"  # GCE's default model: STANDARD
    return str(s.get("provisioningModel") or default)


def provisioning_model_offered(r: Resource) -> Iterator[str]:
    machine = r.props.get("machineType")
    if r.type != T_INSTANCE or not isinstance(machine, str):
        return
    name, model = r.props.get("name", r.name), _model(r.props.get("scheduling"))
    series = machine.rsplit("/", 1)[-1]
    offered = consumption.consumption_models(series)
    if MODELS.get(model) not in offered:
        gce = [k for k, v in MODELS.items() if v in offered]
        yield (f"VM {name!r} is {series}, which GCE offers {', '.join(gce)} only, and its "
               f"scheduling.provisioningModel is {model}: set one of those")
    affinity = mapping(r.props.get("reservationAffinity")).get("type")
    # pulumi-gcp 10.2.0 InstanceSchedulingArgs.provisioning_model: RESERVATION_BOUND "should also" have a
    # reservation_affinity of type SPECIFIC_RESERVATION.
    if model == "RESERVATION_BOUND" and affinity != "SPECIFIC_RESERVATION":
        yield (f"reservation-bound VM {name!r} has reservation affinity {affinity or 'unset (ANY_RESERVATION)'}: "
               "set reservation_affinity type SPECIFIC_RESERVATION naming its reservation")


def flex_start_no_reservation(r: Resource) -> Iterator[str]:
    """Google's tooling sends NO_RESERVATION for flex-start VMs (Cluster Toolkit
    schedmd-slurm-gcp-v6-controller/partition.tf) and refuses reservations with them."""
    if r.type != T_INSTANCE or _model(r.props.get("scheduling")) != "FLEX_START":
        return
    affinity = mapping(r.props.get("reservationAffinity")).get("type")
    if affinity != "NO_RESERVATION":
        yield (f"flex-start VM {r.props.get('name', r.name)!r} has reservation affinity "
               f"{affinity or 'unset (ANY_RESERVATION)'}: flex-start VMs consume no reservation; set "
               "reservation_affinity type NO_RESERVATION")
