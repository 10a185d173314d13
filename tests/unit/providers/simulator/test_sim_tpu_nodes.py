"""Cloud TPU v2 nodes in the simulator, through the real client (google-cloud-tpu, REST): one
machine per worker, guest attributes per worker in worker order, the API's errors."""

from __future__ import annotations

import pytest
from google.api_core import exceptions
from google.cloud import tpu_v2

from tests.fakes.sim_compute import PROJECT, TPU_REGION, TPU_ZONE, ComputeSim, csim, make_csim  # noqa: F401

PARENT = f"projects/{PROJECT}/locations/{TPU_ZONE}"


def node_spec(accelerator: str = "v5litepod-16", spot: bool = False, external: bool = True,
              runtime: str = "v2-alpha-tpuv5-lite") -> tpu_v2.Node:
    """A node as the program's TpuVm declares one."""
    return tpu_v2.Node(
        accelerator_type=accelerator, runtime_version=runtime,
        network_config=tpu_v2.NetworkConfig(network=f"projects/{PROJECT}/global/networks/vpc",
                                            subnetwork=f"projects/{PROJECT}/regions/{TPU_REGION}/subnetworks/vpc-subnet",
                                            enable_external_ips=external),
        scheduling_config=tpu_v2.SchedulingConfig(spot=spot) if spot else None,
        service_account=tpu_v2.ServiceAccount(email=f"nodes@{PROJECT}.iam.gserviceaccount.com",
                                              scope=["cloud-platform"]),
        metadata={"ssh-keys": "me:ssh-ed25519 AAAA me", "enable-guest-attributes": "TRUE"},
        labels={"managed-by": "trainctl"}, tags=["node"])


def create(sim: ComputeSim, node_id: str = "tpu", **spec) -> tpu_v2.Node:
    client = sim.client(tpu_v2.TpuClient)
    return client.create_node(parent=PARENT, node_id=node_id, node=node_spec(**spec)).result(timeout=10)


def test_a_multi_host_slice_is_one_machine_per_worker_with_its_addresses(csim):
    csim.network(region=TPU_REGION)
    node = create(csim)
    assert node.state == tpu_v2.Node.State.READY and node.accelerator_type == "v5litepod-16"
    endpoints = [(e.ip_address, e.access_config.external_ip) for e in node.network_endpoints]
    assert [ip for ip, _ in endpoints] == ["10.128.0.2", "10.128.0.3", "10.128.0.4", "10.128.0.5"]
    assert all(ext.startswith("10.213.") for _, ext in endpoints) and len({e for _, e in endpoints}) == 4
    keys = [f"{PROJECT}/{TPU_ZONE}/tpu-w{i}" for i in range(4)]
    assert csim.backend.called("boot") == keys
    m = csim.backend.machines[keys[2]]
    assert m.internal_ip == "10.128.0.4" and m.external_ip == endpoints[2][1] and m.network == f"{PROJECT}/vpc"
    assert m.accelerators == {"v5litepod-16": 4} and m.metadata["ssh-keys"] == "me:ssh-ed25519 AAAA me"
    assert m.scopes == ("cloud-platform",) and m.tags == ("node",)


def test_without_external_ips_workers_have_internal_addresses_only(csim):
    csim.network(region=TPU_REGION)
    node = create(csim, accelerator="v5litepod-8", external=False)
    assert [e.access_config.external_ip for e in node.network_endpoints] == [""]
    assert csim.backend.machines[f"{PROJECT}/{TPU_ZONE}/tpu-w0"].external_ip is None


def test_guest_attributes_answer_one_entry_per_worker_in_worker_order(make_csim):
    sim = make_csim(delays={"tpu_create": 30})
    sim.network(region=TPU_REGION)
    client = sim.client(tpu_v2.TpuClient)
    client.create_node(parent=PARENT, node_id="tpu", node=node_spec())
    name = f"{PARENT}/nodes/tpu"

    def attributes(**extra):
        return client.get_guest_attributes(request=tpu_v2.GetGuestAttributesRequest(
            name=name, query_path="hostkeys/", **extra)).guest_attributes

    assert [list(a.query_value.items) for a in attributes()] == [[], [], [], []]  # still CREATING
    sim.advance(31)
    answered = attributes()
    expected = [sim.backend.guest_attributes(f"{PROJECT}/{TPU_ZONE}/tpu-w{i}", "hostkeys/")[0]["value"] for i in range(4)]
    assert [a.query_value.items[0].value for a in answered] == expected and len(set(expected)) == 4
    assert [a.query_value.items[0].value for a in attributes(worker_ids=["2"])] == [expected[2]]


@pytest.mark.parametrize("spec, words", [
    ({"accelerator": "v4-8"}, "the accelerator v4-8 was not found in zone us-west4-a"),
    ({"runtime": "tpu-vm-tf-2.99.0"}, 'The field "RuntimeVersion" cannot be "tpu-vm-tf-2.99.0"'),
])
def test_a_type_or_runtime_the_zone_lacks_is_refused(csim, spec, words):
    csim.network(region=TPU_REGION)
    with pytest.raises(exceptions.BadRequest) as caught:
        create(csim, **spec)
    assert words in caught.value.message and "[EID: 0x" in caught.value.message
    assert csim.backend.called("boot") == []


def test_the_zones_tpu_quota_is_checked_at_create(make_csim):
    sim = make_csim(quotas={TPU_ZONE: {"TPUV5sLitepodPerProjectPerZoneForTPUAPI": 16,
                                       "TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI": 0}})
    sim.network(region=TPU_REGION)
    create(sim, node_id="a", accelerator="v5litepod-8")
    with pytest.raises(exceptions.TooManyRequests) as caught:
        create(sim, node_id="b", accelerator="v5litepod-16")
    assert caught.value.message.endswith("Quota limit 'TPUV5sLitepodPerProjectPerZoneForTPUAPI' has been "
                                         "exceeded. Limit: 16 in zone us-west4-a.")
    violation = caught.value.details[0]  # google.rpc.QuotaFailure, as the REST client hands it over
    assert violation["@type"] == "type.googleapis.com/google.rpc.QuotaFailure"
    assert violation["violations"][0]["description"] == ("Quota 'TPUV5sLitepodPerProjectPerZoneForTPUAPI' exhausted. "
                                                   "Limit 16 in zone us-west4-a")
    with pytest.raises(exceptions.TooManyRequests) as caught:
        create(sim, node_id="c", accelerator="v5litepod-8", spot=True)
    assert "TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI" in caught.value.message
    create(sim, node_id="d", accelerator="v5litepod-8")  # 8 + 8 = 16 fits


def test_a_stockout_fails_the_create_operation_and_leaves_no_node(make_csim):
    sim = make_csim(stockouts=[{"zone": TPU_ZONE, "accelerator": "v5litepod-16"}])
    sim.network(region=TPU_REGION)
    with pytest.raises(exceptions.GoogleAPICallError) as caught:
        create(sim)
    assert caught.value.message.startswith('There is no more capacity in the zone "us-west4-a"; you can try in '
                                           "another zone where Cloud TPU Nodes are offered")
    assert sim.http("GET", f"/v2/{PARENT}/operations/" + "x")[0] == 404
    assert list(sim.client(tpu_v2.TpuClient).list_nodes(parent=f"projects/{PROJECT}/locations/-")) == []


def test_stop_start_and_delete(csim):
    csim.network(region=TPU_REGION)
    create(csim, accelerator="v5litepod-8")
    client = csim.client(tpu_v2.TpuClient)
    name = f"{PARENT}/nodes/tpu"
    assert client.stop_node(request=tpu_v2.StopNodeRequest(name=name)).result(timeout=10).state == tpu_v2.Node.State.STOPPED
    assert client.start_node(request=tpu_v2.StartNodeRequest(name=name)).result(timeout=10).state == tpu_v2.Node.State.READY
    client.delete_node(name=name).result(timeout=10)
    with pytest.raises(exceptions.NotFound):
        client.get_node(name=name)
    key = f"{PROJECT}/{TPU_ZONE}/tpu-w0"
    assert [c for c in csim.backend.calls if c[0] in ("boot", "stop", "delete")] == [
        ("boot", key), ("stop", key), ("boot", key), ("delete", key)]
    create(csim, accelerator="v5litepod-8")  # its address came back
    assert client.get_node(name=name).network_endpoints[0].ip_address == "10.128.0.2"


def test_a_preempted_spot_tpu_is_told_then_preempted_and_cannot_start(csim):
    csim.network(region=TPU_REGION)
    create(csim, accelerator="v5litepod-16", spot=True)
    status, _ = csim.http("POST", f"/trainctl-sim/v1/{PARENT}/nodes/tpu:preempt", {"grace_seconds": 30})
    assert status == 200
    assert csim.backend.called("announce_preemption") == [f"{PROJECT}/{TPU_ZONE}/tpu-w{i}" for i in range(4)]
    client = csim.client(tpu_v2.TpuClient)
    assert client.get_node(name=f"{PARENT}/nodes/tpu").state == tpu_v2.Node.State.READY
    csim.advance(31)
    assert client.get_node(name=f"{PARENT}/nodes/tpu").state == tpu_v2.Node.State.PREEMPTED
    assert len(csim.backend.called("stop")) == 4
    with pytest.raises(exceptions.GoogleAPICallError):
        client.start_node(request=tpu_v2.StartNodeRequest(name=f"{PARENT}/nodes/tpu")).result(timeout=10)


def test_patch_changes_labels_and_metadata_reaches_the_workers(csim):
    csim.network(region=TPU_REGION)
    create(csim, accelerator="v5litepod-8")
    client = csim.client(tpu_v2.TpuClient)
    node = tpu_v2.Node(name=f"{PARENT}/nodes/tpu", labels={"a": "b"}, metadata={"k": "v"})
    from google.protobuf import field_mask_pb2

    done = client.update_node(node=node, update_mask=field_mask_pb2.FieldMask(paths=["labels", "metadata"])).result(
        timeout=10)
    assert dict(done.labels) == {"a": "b"}
    assert csim.backend.machines[f"{PROJECT}/{TPU_ZONE}/tpu-w0"].metadata == {"k": "v"}


def test_types_and_runtimes_are_listed_from_the_catalog(csim):
    client = csim.client(tpu_v2.TpuClient)
    types = {t.type_ for t in client.list_accelerator_types(parent=PARENT)}
    assert "v5litepod-16" in types and "v4-8" not in types
    versions = {r.version for r in client.list_runtime_versions(parent=PARENT)}
    assert "v2-alpha-tpuv5-lite" in versions
    got = client.get_accelerator_type(name=f"{PARENT}/acceleratorTypes/v5litepod-16")
    assert got.accelerator_configs[0].topology == "4x4"


def test_a_preempted_spot_tpu_is_preempted_once_every_worker_has_shut_down(csim, monkeypatch):
    csim.network(region=TPU_REGION)
    create(csim, accelerator="v5litepod-16", spot=True)
    shut: set[str] = set()
    monkeypatch.setattr(csim.backend, "shut_down", lambda key: key in shut, raising=False)
    assert csim.http("POST", f"/trainctl-sim/v1/{PARENT}/nodes/tpu:preempt", {"grace_seconds": 30})[0] == 200
    client = csim.client(tpu_v2.TpuClient)
    shut.update(f"{PROJECT}/{TPU_ZONE}/tpu-w{i}" for i in range(3))
    assert client.get_node(name=f"{PARENT}/nodes/tpu").state == tpu_v2.Node.State.READY  # w3 still shutting down
    shut.add(f"{PROJECT}/{TPU_ZONE}/tpu-w3")
    assert client.get_node(name=f"{PARENT}/nodes/tpu").state == tpu_v2.Node.State.PREEMPTED
    assert len(csim.backend.called("stop")) == 4
