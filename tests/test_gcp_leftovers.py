"""`down --force` after a failed destroy, through the real Compute and Storage clients against the
loopback fake: the network goes by the names the program gives it (waiting while VMs still use
it, within a bound), an ephemeral stack's bucket goes with every object only if it carries the
stack's labels, and a named stack's bucket is not touched."""

from __future__ import annotations

import pytest

from gcp_fake import FakeGoogleServer, google  # noqa: F401 (fixture)
from infra.errors import ProvisionError
from infra.gcp import leftovers
from infra.gcp.storage import bucket_name
from infra.stack_config import load_stack

OURS = {"managed-by": "trainctl", "trainctl-stack": "gpu-t4x2"}


def ephemeral():
    return load_stack("gpu-t4x2").model_copy(update={"ephemeral": True})


def test_an_ephemeral_stacks_bucket_goes_with_all_its_objects(google: FakeGoogleServer) -> None:
    spec = ephemeral()
    objects = {f"run/checkpoints/ckpt-{i}.pt": b"w" for i in range(5)}  # pages of 2 in the fake
    google.state.buckets[bucket_name(spec)] = {"labels": OURS, "objects": dict(objects)}
    google.state.buckets["someone-else"] = {"labels": {}, "objects": {"x": b"1"}}
    said: list[str] = []
    leftovers.sweep_bucket(spec, said.append)
    assert list(google.state.buckets) == ["someone-else"]
    assert said == [f"deleted bucket {bucket_name(spec)} and its 5 object(s)"]


def test_a_bucket_without_the_stacks_labels_is_left_alone(google: FakeGoogleServer) -> None:
    spec = ephemeral()
    google.state.buckets[bucket_name(spec)] = {"labels": {**OURS, "trainctl-stack": "other"},
                                               "objects": {"a": b"1"}}
    said: list[str] = []
    leftovers.sweep_bucket(spec, said.append)
    assert google.state.buckets[bucket_name(spec)]["objects"] == {"a": b"1"}
    assert "does not carry stack gpu-t4x2's labels: left alone" in said[0]


def test_a_named_stacks_bucket_and_a_missing_one_cost_no_deletion(google: FakeGoogleServer) -> None:
    named = load_stack("gpu-t4x2")
    google.state.buckets[bucket_name(named)] = {"labels": OURS, "objects": {"a": b"1"}}
    leftovers.sweep_bucket(named, lambda _line: None)
    assert google.state.calls == []  # kept on down: not even looked at
    del google.state.buckets[bucket_name(named)]
    leftovers.sweep_bucket(ephemeral(), lambda _line: None)  # gone already: nothing to do
    assert [c.method for c in google.state.calls] == ["GET"]


def test_a_network_still_in_use_past_the_bound_is_named_with_what_to_do(google: FakeGoogleServer) -> None:
    spec = load_stack("gpu-t4x2")
    region = spec.zone.rsplit("-", 1)[0]
    subnet = (spec.project, region, "subnetworks", f"{spec.name}-subnet")
    google.state.network_resources |= {subnet, (spec.project, "global", "networks", f"{spec.name}-vpc")}
    google.state.in_use[subnet] = 100
    said: list[str] = []
    with pytest.raises(ProvisionError, match=rf"subnetwork {spec.name}-subnet is still in use .*"
                                             rf"run `trainctl down --stack {spec.name} --force` again"):
        leftovers.sweep_network(spec, said.append, timeout=0.3, poll=0.05)
    assert any("still in use (its VMs are going): asking again" in line for line in said)
    assert (spec.project, "global", "networks", f"{spec.name}-vpc") in google.state.network_resources


def test_what_has_no_client_here_is_named_with_the_command_that_deletes_it() -> None:
    spec = load_stack("gpu-t4x2").model_copy(update={"scheduled_reaper": True})
    commands = leftovers.not_swept(spec)
    assert commands[0] == (f"gcloud artifacts repositories delete {spec.name}-images "
                           f"--location {spec.zone.rsplit('-', 1)[0]} --project {spec.project}")
    assert f"gcloud iam service-accounts delete {spec.name}-sa@{spec.project}.iam.gserviceaccount.com" in commands[1]
    assert any(c.startswith(f"gcloud functions delete {spec.name}-reaper --gen2") for c in commands)
    assert len(leftovers.not_swept(spec.model_copy(update={"scheduled_reaper": False}))) == 2
