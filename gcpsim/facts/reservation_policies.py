"""Which reservations a VM with resource policies (a compact placement policy) may consume.

  - Compute's Reservation.deploymentType: DENSE, "The reserved capacity is made up of densely
    deployed reservation blocks", or DEPLOYMENT_TYPE_UNSPECIFIED; Reservation.resourcePolicies:
    "Resource policies to be added to this reservation ... This is to define placement policy with
    reservation" (compute v1 discovery document);
  - GoogleCloudPlatform/cluster-toolkit community/modules/scheduler/schedmd-slurm-gcp-v6-controller/
    modules/slurm_files/scripts/resume.py, update_reservation_props: a VM consuming a reservation
    carries the reservation's own policies if it has some, the external placement policy only if the
    reservation is DENSE, else none ("vanilla reservations don't support external policies");
    cluster-toolkit#3347: "Dense reservations support using external placement policy (contrary to
    vanilla ones)".
GCE's error text for such an insert is not published: the simulator answers in its own words.
"""

from __future__ import annotations

DENSE = "DENSE"


def takes_external_policies(reservation: dict[str, object]) -> bool:
    return reservation.get("deploymentType") == DENSE


def own_policies(reservation: dict[str, object]) -> set[str]:
    """The names of the reservation's own resource policies (resourcePolicies: key -> policy URL)."""
    held = reservation.get("resourcePolicies") or {}
    assert isinstance(held, dict)
    return {str(url).rsplit("/", 1)[-1] for url in held.values()}
