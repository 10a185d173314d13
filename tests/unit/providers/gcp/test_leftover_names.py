"""What `down --force` names without a project to ask (infra/providers/gcp/leftovers.py): the
networks and placement policies the program declares, and the command that deletes each thing it
has no client for. Sweeping them in a simulated project: tests/integration/providers/gcp/test_gcp_leftovers.py."""

from __future__ import annotations

import pytest

from infra.providers.gcp import leftovers


def test_what_has_no_client_here_is_named_with_the_command_that_deletes_it() -> None:
    from infra.spec.stack_config import load_stack

    spec = load_stack("gpu-t4x2").model_copy(update={"scheduled_reaper": True})
    assert spec.zone
    commands = leftovers.not_swept(spec)
    assert commands[0] == (f"gcloud artifacts repositories delete {spec.name}-images "
                           f"--location {spec.zone.rsplit('-', 1)[0]} --project {spec.project}")
    assert f"gcloud iam service-accounts delete {spec.name}-sa@{spec.project}.iam.gserviceaccount.com" in commands[1]
    assert any(c.startswith(f"gcloud functions delete {spec.name}-reaper --gen2") for c in commands)
    assert len(leftovers.not_swept(spec.model_copy(update={"scheduled_reaper": False}))) == 2


@pytest.mark.parametrize("stack", ["gpu-a3mega-x2", "gpu-a4-x2", "gpu-t4x2"])
def test_force_down_names_every_network_and_placement_policy_the_program_declares(stack: str) -> None:
    from infra.providers.gcp.program.mocks import evaluate
    from infra.spec.stack_config import load_stack

    spec = load_stack(stack)
    kinds = {"compute/firewall:Firewall": "firewalls", "compute/network:Network": "networks",
             "compute/subnetwork:Subnetwork": "subnetworks", "compute/resourcePolicy:ResourcePolicy": "resourcePolicies"}
    declared = {(kinds[r.type.split(":", 1)[1]], r.inputs["name"]) for r in evaluate(spec).resources
                if r.type.split(":", 1)[1] in kinds}
    named = set(leftovers.network_names(spec))
    assert declared <= named  # nothing declared escapes `down --force`
    assert named - declared <= {("routers", f"{spec.name}-router"), ("resourcePolicies", f"{spec.name}-placement")}
