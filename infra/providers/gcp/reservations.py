"""Reservation pre-flight: before anything is created, a stack that names a reservation is checked
against it, as the Compute API describes it (reservations.get, aggregatedList): it exists in the
stack's zone, it reserves the pools' machine type and GPUs, and its free capacity
(`specificReservation.count - inUseCount`) holds every node that names it. Without this check
GCE refuses the first VM mid-`up` ("Specified reservation ... has no available capacity"), after
the network and the bucket exist."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

from infra.errors import ConfigError
from infra.providers.gcp.reaper import google_client
from infra.spec import catalog
from infra.spec.cluster import ClusterSpec
from infra.spec.cluster_sections import named_reservation


@dataclass(frozen=True)
class Reserved:
    """What a reservation holds, as Compute describes it (specificReservation)."""
    machine_type: str
    gpus: dict[str, int]  # instanceProperties.guestAccelerators: type -> count
    count: int
    in_use: int
    # Reservation.deploymentType ("DENSE": densely deployed blocks) and its own resourcePolicies: only
    # such a reservation's VMs take an external (the stack's compact) placement policy (Cluster
    # Toolkit slurm_files/scripts/resume.py update_reservation_props).
    dense: bool = False
    own_policies: bool = False


def wanted(spec: ClusterSpec) -> dict[str, list[tuple[str, ClusterSpec]]]:
    """The pools (what to call each, its one-group spec) that name each reservation. A TPU's
    reservation is the TPU service's, not Compute's: only its v2alpha1 API lists them
    (projects.locations.reservations), so the queued resource that names one is left to say
    itself when it cannot use it (FAILED, with the service's reason)."""
    if spec.kind == "tpu":
        return {}
    out: dict[str, list[tuple[str, ClusterSpec]]] = defaultdict(list)
    for role, _, view in spec.groups():
        name = named_reservation(view.reservation)
        if name:
            out[name].append((f"{role} pool" if role else f"stack {spec.name}", view))
    return dict(out)


def attached_gpus(view: ClusterSpec) -> dict[str, int]:
    """The GPUs an instance of the pool lists as guestAccelerators: none for machine types that
    bundle theirs (the program sends no accelerator list for them)."""
    machine = catalog.MACHINES[view.machine_type or ""]
    if not view.gpu or machine.bundled_gpu:
        return {}
    return {view.gpu.type: view.gpu.count}


def problems(spec: ClusterSpec, name: str, pools: list[tuple[str, ClusterSpec]], found: Reserved | None,
             elsewhere: list[str]) -> list[str]:
    """What keeps the reservation `found` (None if not in the stack's zone) from holding `pools`."""
    if found is None:
        if elsewhere:
            return [f"it is in zone {', '.join(elsewhere)}, not in the stack's zone {spec.zone} (a VM consumes "
                    f"only reservations of its own zone): set zone: {elsewhere[0]}, or name a reservation "
                    f"in {spec.zone}"]
        return [f"project {spec.project} has no reservation {name!r} in any zone "
                f"(`gcloud compute reservations list --project={spec.project}` lists them)"]
    machine = found.machine_type
    bundled = catalog.MACHINES[machine].bundled_gpu if machine in catalog.MACHINES else None
    gpus = {g: n for g, n in found.gpus.items() if g != bundled}
    out = []
    for what, view in pools:
        if machine != view.machine_type or gpus != attached_gpus(view):
            shown = " + ".join(f"{n} x {g}" for g, n in gpus.items())
            wanted_gpus = " + ".join(f"{n} x {g}" for g, n in attached_gpus(view).items())
            out.append(f"it reserves {machine}{' with ' + shown if shown else ''}, and the {what}'s VMs are "
                       f"{view.machine_type}{' with ' + wanted_gpus if wanted_gpus else ''}")
    if spec.placement == "compact" and not (found.dense or found.own_policies):
        out.append("it is a plain reservation (not deploymentType DENSE, no placement policy of its own), which "
                   "takes no external resource policy, and the stack places its VMs compactly: set placement: none")
    nodes = sum(view.node_count for _, view in pools)
    free = found.count - found.in_use
    if nodes > free:
        out.append(f"it has room for {max(free, 0)} more VM(s) (count {found.count}, {found.in_use} in use) "
                   f"and the stack needs {nodes}")
    return out


def check(spec: ClusterSpec, progress: Callable[[str], None] = lambda _line: None) -> None:
    """Refuses (ConfigError, exit 2) a stack whose named reservation cannot hold its nodes."""
    named = wanted(spec)
    if not named:
        return
    from infra.providers.gcp.prerequisites import check_google_credentials

    check_google_credentials()
    failures = []
    for name, pools in sorted(named.items()):
        found, elsewhere = _read(spec, name)
        wrong = problems(spec, name, pools, found, elsewhere)
        if wrong:
            failures.append(f"  - reservation {name!r}: " + "; ".join(wrong))
        else:
            progress(f"reservation {name}: room for the stack's {sum(v.node_count for _, v in pools)} VM(s)")
    if failures:
        raise ConfigError(f"stack {spec.name} cannot run on its reservation (nothing was created):\n"
                          + "\n".join(failures))


def _read(spec: ClusterSpec, name: str) -> tuple[Reserved | None, list[str]]:
    """The reservation in the stack's zone, or None and the zones that hold one by that name."""
    from google.api_core.exceptions import Forbidden, NotFound
    from google.cloud import compute_v1

    client = google_client(compute_v1.ReservationsClient)
    try:
        reservation = client.get(project=spec.project, zone=spec.zone, reservation=name)
        specific = reservation.specific_reservation
        props = specific.instance_properties
        return Reserved(props.machine_type.rsplit("/", 1)[-1],
                        {a.accelerator_type.rsplit("/", 1)[-1]: a.accelerator_count for a in props.guest_accelerators},
                        specific.count, specific.in_use_count, dense=reservation.deployment_type == "DENSE",
                        own_policies=bool(reservation.resource_policies)), []
    except NotFound:
        pass
    except Forbidden as exc:  # over REST a disabled API answers 403 SERVICE_DISABLED
        if getattr(exc, "reason", None) != "SERVICE_DISABLED":
            raise
        raise ConfigError(f"project {spec.project} has the Compute Engine API off, so it holds no reservation "
                          f"{name!r}: enable it (`gcloud services enable compute.googleapis.com "
                          f"--project={spec.project}`) and make the reservation, or remove reservation") from None
    request = compute_v1.AggregatedListReservationsRequest(project=spec.project, filter=f"name = {name}")
    zones = [scope.removeprefix("zones/") for scope, scoped in client.aggregated_list(request=request)
             if any(r.name == name for r in scoped.reservations)]
    return None, sorted(zones)
