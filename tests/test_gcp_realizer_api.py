"""The realizer's Google API calls (host keys from guest attributes) through the real client
classes over REST against the loopback fake in gcp_fake.py."""

from __future__ import annotations

from gcp_fake import FakeGoogleServer, google  # noqa: F401 (fixture)
from infra.gcp import realizer
from infra.stack_config import load_stack

ED = {"namespace": "hostkeys", "key": "ssh-ed25519", "value": "AAAAC3NzaC1lZDI1NTE5AAAAIFakeKey"}
RSA = {"namespace": "hostkeys", "key": "ssh-rsa", "value": "AAAAB3NzaC1yc2EAAAADAQABFake"}



def _worker(i: int) -> list[dict[str, str]]:
    return [{**ED, "value": f"{ED['value']}{i}"}, {"namespace": "guestInventory", "key": "os", "value": "x"}]


def test_tpu_multi_host_keys_come_back_per_worker_in_order(google: FakeGoogleServer) -> None:
    spec = load_stack("tpu-v5e-16", name="keys")
    node = f"projects/{spec.project}/locations/{spec.zone}/nodes/keys-tpu"
    google.state.tpu_nodes[node] = {"state": "READY"}
    google.state.tpu_guest_attributes[node] = [_worker(i) for i in range(4)]
    found = realizer._tpu_host_keys(spec)
    assert found == {f"keys-tpu-w{i}": [f"ssh-ed25519 {ED['value']}{i}"] for i in range(4)}
    call = next(c for c in google.state.calls if c.path.endswith(":getGuestAttributes"))
    assert call.method == "POST" and call.body == {"queryPath": "hostkeys/"}


def test_tpu_not_created_yet_means_no_keys(google: FakeGoogleServer) -> None:
    assert realizer._tpu_host_keys(load_stack("tpu-v5e-16", name="keys")) == {}


def test_vm_host_keys_from_compute_guest_attributes(google: FakeGoogleServer) -> None:
    spec = load_stack("gpu-t4x2", name="keys")
    google.state.instances[(spec.project, spec.zone, "keys-w0")] = {"labels": {}}
    google.state.instance_guest_attributes[(spec.project, spec.zone, "keys-w0")] = [ED, RSA]
    assert realizer._instance_host_keys(spec, "keys-w0") == [
        f"ssh-ed25519 {ED['value']}", f"ssh-rsa {RSA['value']}"]
    call = next(c for c in google.state.calls if c.path.endswith("/getGuestAttributes"))
    assert call.method == "GET" and call.query["queryPath"] == ["hostkeys/"]


def test_vm_before_the_agent_published_keys_means_none_yet(google: FakeGoogleServer) -> None:
    spec = load_stack("gpu-t4x2", name="keys")
    google.state.instances[(spec.project, spec.zone, "keys-w0")] = {"labels": {}}
    assert realizer._instance_host_keys(spec, "keys-w0") == []


def test_fetch_host_keys_for_every_vm(google: FakeGoogleServer) -> None:
    spec = load_stack("gpu-t4x2", name="keys")
    for i in range(2):
        google.state.instances[(spec.project, spec.zone, f"keys-w{i}")] = {"labels": {}}
        google.state.instance_guest_attributes[(spec.project, spec.zone, f"keys-w{i}")] = [ED]
    nodes = [{"name": f"keys-w{i}"} for i in range(2)]
    assert realizer.fetch_host_keys(spec, nodes, lambda _m: None) == {
        f"keys-w{i}": [f"ssh-ed25519 {ED['value']}"] for i in range(2)}


def test_instance_status_reads_compute_and_a_deleted_vm_is_none(google: FakeGoogleServer, monkeypatch) -> None:
    """What the launcher asks when a spot node stops answering: stopped, running or gone."""
    spec = load_stack("gpu-l4-spot", name="spotty")
    monkeypatch.setattr(realizer, "spec", lambda stack: spec)
    google.state.instances[(spec.project, spec.zone, "spotty-node-0")] = {"labels": {}, "status": "TERMINATED"}
    google.state.instances[(spec.project, spec.zone, "spotty-node-1")] = {"labels": {}}
    assert realizer.instance_status("spotty", ["spotty-node-0", "spotty-node-1", "spotty-node-2"]) == {
        "spotty-node-0": "TERMINATED", "spotty-node-1": "RUNNING", "spotty-node-2": None}
    assert google.refused() == []


def test_a_preempted_tpu_slice_reads_as_terminated_on_every_worker(google: FakeGoogleServer, monkeypatch) -> None:
    from infra.gcp.tpu import tpu_name

    spec = load_stack("tpu-v5e-8", name="tpus")
    monkeypatch.setattr(realizer, "spec", lambda stack: spec)
    name = f"projects/{spec.project}/locations/{spec.zone}/nodes/{tpu_name(spec)}"
    google.state.tpu_nodes[name] = {"state": "PREEMPTED"}
    assert realizer.instance_status("tpus", ["tpus-w0"]) == {"tpus-w0": "TERMINATED"}
    del google.state.tpu_nodes[name]
    assert realizer.instance_status("tpus", ["tpus-w0"]) == {"tpus-w0": None}
    assert google.refused() == []
