"""The reaper through the real Compute / TPU / GKE client classes (REST) against the loopback fake."""

from __future__ import annotations

from gcp_fake import FakeGoogleServer, google  # noqa: F401 (fixture)
from infra.gcp import reaper

P = "proj"
NOW = 2_000_000_000


def _labels(expires: int, stack: str = "s1") -> dict[str, str]:
    return {"managed-by": "trainctl", "trainctl-expires": str(expires), "trainctl-stack": stack}



def _fill(s: FakeGoogleServer) -> None:
    st = s.state
    st.instances[(P, "us-central1-a", "old-w0")] = {"labels": _labels(NOW - 60)}
    st.instances[(P, "us-central1-a", "fresh-w0")] = {"labels": _labels(NOW + 60)}
    st.instances[(P, "us-east1-b", "someone-elses")] = {"labels": {"team": "x"}}
    st.tpu_nodes[f"projects/{P}/locations/us-west4-a/nodes/old-tpu"] = {"labels": _labels(NOW - 10)}
    st.tpu_nodes[f"projects/{P}/locations/us-west4-a/nodes/fresh-tpu"] = {"labels": _labels(NOW + 10)}
    st.queued_resources[f"projects/{P}/locations/us-west4-a/queuedResources/old-qr"] = {
        "tpu": {"nodeSpec": [{"parent": f"projects/{P}/locations/us-west4-a", "nodeId": "old-q",
                              "node": {"acceleratorType": "v5litepod-16", "runtimeVersion": "v2-alpha-tpuv5-lite",
                                       "labels": _labels(NOW - 5, "q")}}]},
        "state": {"state": "ACTIVE"}}
    st.queued_resources[f"projects/{P}/locations/us-west4-a/queuedResources/unlabelled"] = {
        "tpu": {"nodeSpec": [{"parent": f"projects/{P}/locations/us-west4-a", "nodeId": "u",
                              "node": {"acceleratorType": "v5litepod-16"}}]},
        "state": {"state": "WAITING_FOR_RESOURCES"}}
    st.clusters[(P, "us-central1", "old-gke")] = {"resourceLabels": _labels(NOW - 1, "g"), "status": "RUNNING"}
    st.clusters[(P, "us-central1", "fresh-gke")] = {"resourceLabels": _labels(NOW + 1, "g2"), "status": "RUNNING"}


def test_finds_every_kind_of_expired_resource_and_nothing_else(google: FakeGoogleServer) -> None:
    _fill(google)
    found = reaper.find_expired(P, now=NOW)
    assert sorted((e.kind, e.name, e.zone, e.stack, e.expired_for_s) for e in found) == sorted([
        ("instance", "old-w0", "us-central1-a", "s1", 60),
        ("tpu", f"projects/{P}/locations/us-west4-a/nodes/old-tpu", "us-west4-a", "s1", 10),
        ("queued-tpu", f"projects/{P}/locations/us-west4-a/queuedResources/old-qr", "us-west4-a", "q", 5),
        ("gke", f"projects/{P}/locations/us-central1/clusters/old-gke", "us-central1", "g", 1),
    ])
    aggregated = next(c for c in google.state.calls if c.path.endswith("/aggregated/instances"))
    assert aggregated.query["filter"] == ["labels.managed-by = trainctl"]
    assert any(c.path == f"/v1/projects/{P}/locations/-/clusters" for c in google.state.calls)


def test_deletes_what_it_found(google: FakeGoogleServer) -> None:
    _fill(google)
    said: list[str] = []
    reaper.delete(P, reaper.find_expired(P, now=NOW), said.append)
    st = google.state
    assert set(st.instances) == {(P, "us-central1-a", "fresh-w0"), (P, "us-east1-b", "someone-elses")}
    assert list(st.tpu_nodes) == [f"projects/{P}/locations/us-west4-a/nodes/fresh-tpu"]
    assert list(st.queued_resources) == [f"projects/{P}/locations/us-west4-a/queuedResources/unlabelled"]
    assert list(st.clusters) == [(P, "us-central1", "fresh-gke")]
    qr_delete = next(c for c in st.calls if c.method == "DELETE" and "/queuedResources/" in c.path)
    assert qr_delete.query["force"] == ["true"]  # an ACTIVE queued resource needs it
    assert len(said) == 4 and all(line.startswith("deleted ") for line in said)


def test_nothing_expired_deletes_nothing(google: FakeGoogleServer) -> None:
    assert reaper.find_expired(P, now=NOW) == []
    reaper.delete(P, [], lambda _m: None)
    assert not [c for c in google.state.calls if c.method == "DELETE"]


def test_the_fake_refuses_a_misspelt_field(google: FakeGoogleServer) -> None:
    """The fake is strict: a request field the API does not have is a 400, not a silent pass."""
    import requests

    r = requests.get(f"{google.endpoint}/compute/v1/projects/{P}/aggregated/instances?filtre=x", timeout=10)
    assert r.status_code == 400 and r.json()["error"]["status"] == "INVALID_ARGUMENT"
    r = requests.post(f"{google.endpoint}/v2/projects/{P}/locations/z/nodes/n:getGuestAttributes",
                      json={"query_path": "hostkeys/"}, timeout=10)
    assert r.status_code == 400
    google.errors.clear()
