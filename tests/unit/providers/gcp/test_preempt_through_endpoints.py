"""`trainctl preempt` on a GCP stack: where the stack's endpoints record names a preemption
endpoint (a simulated project's), the node's VM (or its TPU slice) is POSTed there, and only
there; on a stack that reaches Google it is refused, naming what Google documents for testing a
Spot VM's preemption (a simulated host maintenance event)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import trainctl
from infra.providers.gcp import preemption, private_endpoints
from infra.providers.gcp.pulumi_workspace import write_meta
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from infra.providers.realizers import Unsupported
from infra.providers.stack_home import record_provider, state_dir
from infra.spec.cluster import ClusterSpec
from infra.errors import ConfigError

BASE = {"name": "spotty", "provider": "gcp", "project": "my-project", "zone": "us-central1-a", "nodes": 2,
        "machine_type": "g2-standard-8", "spot": True, "ssh": {"source_ranges": ["203.0.113.7/32"]}}


class _Endpoint:
    """A stand-in private endpoint that records what is POSTed to it and answers as the
    simulator's preemption endpoint does (or refuses as it does)."""

    def __init__(self, status: int = 200, answer: object = None) -> None:
        self.posted: list[tuple[str, object]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                outer.posted.append((self.path, json.loads(self.rfile.read(length) or b"null")))
                body = json.dumps(answer if answer is not None else {"action": "STOP"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def gcp_stack(trainctl_home, monkeypatch):
    """A GCP stack's state (provider and spec, nothing created); no endpoints in use."""
    monkeypatch.setattr(private_endpoints, "_in_use", None)
    for var in (API_ENDPOINT_ENV, private_endpoints.NODE_API_ENDPOINT_ENV, "PULUMI_BACKEND_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", __import__("os").environ["PATH"])  # restored after `use` prepends tools

    def make(**overrides: object) -> ClusterSpec:
        spec = ClusterSpec.model_validate({**BASE, **overrides})
        record_provider(spec.name, "gcp")
        write_meta(spec, None)
        return spec
    yield make
    for endpoint in _endpoints:
        endpoint.server.shutdown()
    _endpoints.clear()


_endpoints: list[_Endpoint] = []


def _recorded(stack: str, endpoint: _Endpoint, preempt: bool = True) -> None:
    _endpoints.append(endpoint)
    machines = {"accelerators": False, "on_this_host": True,
                **({"preempt": f"{endpoint.url}/trainctl-sim/v1/{{path}}:preempt"} if preempt else {})}
    (state_dir(stack) / private_endpoints.RECORD).write_text(json.dumps({"api": endpoint.url, "machines": machines}))


def test_a_simulated_stack_s_vm_is_preempted_through_the_endpoint_its_record_names(gcp_stack):
    spec = gcp_stack()
    endpoint = _Endpoint()
    _recorded(spec.name, endpoint)
    said: list[str] = []
    from infra.providers.gcp import realizer

    assert realizer.preempt(spec.name, "spotty-node1", grace=5, progress=said.append) == "STOP"
    assert endpoint.posted == [("/trainctl-sim/v1/projects/my-project/zones/us-central1-a/instances/"
                                "spotty-node1:preempt", {"grace_seconds": 5.0})]
    assert said and "spotty-node1: preempted" in said[0] and "then STOP" in said[0]


def test_a_tpu_worker_s_preemption_reclaims_its_slice(gcp_stack):
    spec = gcp_stack(kind="tpu", nodes=4, machine_type=None, tpu={"type": "v5litepod-16"})
    endpoint = _Endpoint(answer={"node": "x"})
    _recorded(spec.name, endpoint)
    (slice_path,) = preemption.node_kind(spec).slice_paths()
    worker = f"{slice_path.rsplit('/', 1)[-1]}-w1"
    assert preemption.preempt(spec.name, spec, worker, grace=0, progress=lambda _: None) == "PREEMPTED"
    assert endpoint.posted == [(f"/trainctl-sim/v1/{slice_path}:preempt", {"grace_seconds": 0.0})]


def test_the_simulator_s_refusal_is_said_in_its_words(gcp_stack):
    spec = gcp_stack()
    _recorded(spec.name, _Endpoint(status=400, answer={"error": {"code": 400, "message": "x is not Spot"}}))
    with pytest.raises(ConfigError, match="the preemption was refused: x is not Spot"):
        preemption.preempt(spec.name, spec, "spotty-node0", grace=30, progress=lambda _: None)


def test_what_google_cannot_do_is_refused_before_anything_is_posted(gcp_stack):
    spec = gcp_stack()
    endpoint = _Endpoint()
    _recorded(spec.name, endpoint)
    with pytest.raises(ConfigError, match="unavailable-for"):
        preemption.preempt(spec.name, spec, "spotty-node0", grace=30, progress=lambda _: None, unavailable_for=60)
    with pytest.raises(ConfigError, match="instanceTerminationAction"):
        preemption.preempt(spec.name, spec, "spotty-node0", grace=30, progress=lambda _: None, action="DELETE")
    assert endpoint.posted == []


def test_an_endpoints_record_without_a_preemption_endpoint_is_refused_naming_google_s_way(gcp_stack):
    spec = gcp_stack()
    endpoint = _Endpoint()
    _recorded(spec.name, endpoint, preempt=False)
    with pytest.raises(Unsupported, match="names no way to preempt a VM") as refused:
        preemption.preempt(spec.name, spec, "spotty-node0", grace=30, progress=lambda _: None)
    assert "simulate-maintenance-event spotty-node0 --zone us-central1-a" in str(refused.value)
    assert endpoint.posted == []


def test_the_cli_refuses_on_a_stack_that_reaches_google_and_points_to_what_works_there(gcp_stack):
    spec = gcp_stack()
    done = trainctl("preempt", "spotty-node1", "--stack", spec.name)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert "Google reclaims Spot VMs itself and has no API that preempts one" in said
    assert "gcloud compute instances simulate-maintenance-event spotty-node1 --zone us-central1-a" in said
    assert preemption.SIMULATE_MAINTENANCE_DOC in said
    assert "--simulate" in said
