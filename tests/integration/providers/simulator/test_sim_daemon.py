"""The simulator as a service: started on demand, found again by later callers, state kept."""

from __future__ import annotations

import json
import urllib.request

import pytest

from gcpsim import daemon


@pytest.fixture
def home(tmp_path):
    yield tmp_path / "sim"
    daemon.stop(tmp_path / "sim")


def _post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def test_a_second_caller_finds_the_running_simulator_and_its_state(home):
    url = daemon.ensure_running(home, api_only=True)
    assert _post(url, "/trainctl-sim/v1/projects", {"project": "kept-project"})["created"] is True
    assert daemon.ensure_running(home, api_only=True) == url
    assert _post(url, "/trainctl-sim/v1/projects", {"project": "kept-project"})["created"] is False


def test_a_restarted_simulator_keeps_its_port_and_its_world(home):
    url = daemon.ensure_running(home, api_only=True)
    _post(url, "/trainctl-sim/v1/projects", {"project": "kept-project"})
    assert daemon.stop(home) is True
    assert daemon.url_of(home) is None
    again = daemon.ensure_running(home, api_only=True)
    assert again == url
    assert _post(again, "/trainctl-sim/v1/projects", {"project": "kept-project"})["created"] is False
