"""The local stack's metadata server answers as GCE's does: the flavor header, directories,
recursive JSON, wait_for_change, guest attributes written by the node and read by the controller.
Here on loopback (the node is 127.0.0.1); tests/e2e/test_local_metadata_on_nodes.py asks from nodes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import free_port, REPO
from namespace_nodes import metadata_admin

NODE = {"name": "node0", "ip": "127.0.0.1", "id": 4242, "zone": "local-a", "machine-type": "local",
        "spot": True, "attributes": {"enable-oslogin": "FALSE", "trainctl-stack": "s"},
        "service-account": {"email": "nodes-sa@local-p.iam.gserviceaccount.com",
                            "scopes": ["https://www.googleapis.com/auth/cloud-platform"], "token": "ya29.sim-x"}}


@pytest.fixture
def server(tmp_path):
    config = tmp_path / "metadata.json"
    config.write_text(json.dumps({"project": {"project-id": "local-p", "numeric-project-id": 7},
                                  "nodes": [NODE]}))
    port, admin = free_port(), free_port()
    proc = subprocess.Popen([sys.executable, "-m", "namespace_nodes.metadata", "--config", str(config),
                             "--listen", f"127.0.0.1:{port}", "--admin", f"127.0.0.1:{admin}"], cwd=REPO)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", admin), timeout=0.2).close()
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "server did not start"
            time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/computeMetadata/v1", f"http://127.0.0.1:{admin}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def get(url: str, flavor: bool = True, **headers: str):
    request = urllib.request.Request(url, headers={**({"Metadata-Flavor": "Google"} if flavor else {}), **headers})
    return urllib.request.urlopen(request, timeout=10)


def test_a_request_without_the_flavor_header_is_refused(server):
    base, _ = server
    with pytest.raises(urllib.error.HTTPError) as refused:
        get(f"{base}/instance/name", flavor=False)
    assert refused.value.code == 403 and refused.value.headers["Metadata-Flavor"] == "Google"
    with pytest.raises(urllib.error.HTTPError) as proxied:
        get(f"{base}/instance/name", **{"X-Forwarded-For": "10.0.0.9"})
    assert proxied.value.code == 403


def test_values_directories_and_recursive_json_are_gce_shaped(server):
    base, _ = server
    answer = get(f"{base}/instance/name")
    assert answer.read().decode() == "node0" and answer.headers["Metadata-Flavor"] == "Google"
    assert get(f"{base}/instance/network-interfaces/0/ip").read().decode() == "127.0.0.1"
    assert get(f"{base}/instance/zone").read().decode() == "projects/7/zones/local-a"
    assert get(f"{base}/instance/attributes/enable-oslogin").read().decode() == "FALSE"
    listing = get(f"{base}/instance/").read().decode().splitlines()
    assert "attributes/" in listing and "network-interfaces/" in listing and "preempted" in listing
    tree = json.loads(get(f"{base}/instance/?recursive=true").read())
    assert tree["machineType"] == "projects/7/machineTypes/local"
    assert tree["networkInterfaces"] == [{"ip": "127.0.0.1"}] and tree["preempted"] == "FALSE"
    assert tree["attributes"]["trainctl-stack"] == "s"  # user-named keys stay as written
    assert tree["scheduling"]["preemptible"] == "TRUE"
    # a directory without its slash is redirected to it (urllib follows)
    assert get(f"{base}/instance/attributes").geturl().endswith("/instance/attributes/")
    with pytest.raises(urllib.error.HTTPError) as missing:
        get(f"{base}/instance/no-such-key")
    assert missing.value.code == 404


def test_wait_for_change_holds_until_the_node_is_preempted(server):
    base, admin = server
    first = get(f"{base}/instance/preempted")
    assert first.read().decode() == "FALSE"
    answers: list[str] = []
    waiter = threading.Thread(target=lambda: answers.append(get(
        f"{base}/instance/preempted?wait_for_change=true&last_etag={first.headers['ETag']}").read().decode()))
    waiter.start()
    time.sleep(0.5)
    assert answers == []  # still held
    metadata_admin.preempt(admin, "node0")
    waiter.join(timeout=10)
    assert answers == ["TRUE"]
    # an etag that is already stale answers at once
    assert get(f"{base}/instance/preempted?wait_for_change=true&last_etag=0").read().decode() == "TRUE"
    # a wait that times out answers with the unchanged value
    assert get(f"{base}/instance/preempted?wait_for_change=true&timeout_sec=0.2").read().decode() == "TRUE"


def test_guest_attributes_written_by_the_node_are_read_by_the_controller(server):
    base, admin = server
    request = urllib.request.Request(f"{base}/instance/guest-attributes/hostkeys/ssh-ed25519",
                                     data=b"AAAAC3Nza", method="PUT", headers={"Metadata-Flavor": "Google"})
    urllib.request.urlopen(request, timeout=10)
    assert get(f"{base}/instance/guest-attributes/hostkeys/ssh-ed25519").read().decode() == "AAAAC3Nza"
    read = metadata_admin.guest_attributes(admin, "node0", "hostkeys/")
    assert read["queryValue"]["items"] == [{"namespace": "hostkeys", "key": "ssh-ed25519", "value": "AAAAC3Nza"}]
    # nothing else is writable
    bad = urllib.request.Request(f"{base}/instance/name", data=b"x", method="PUT",
                                 headers={"Metadata-Flavor": "Google"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(bad, timeout=10)
    assert refused.value.code == 403


def test_a_node_booted_again_starts_fresh(server):
    base, admin = server
    metadata_admin.preempt(admin, "node0")
    metadata_admin.boot(admin, {**NODE, "id": 4343})
    assert get(f"{base}/instance/preempted").read().decode() == "FALSE"
    assert get(f"{base}/instance/id").read().decode() == "4343"


def test_the_nodes_account_token_is_served_as_gce_serves_it_and_never_listed(server):
    base, _ = server
    answer = get(f"{base}/instance/service-accounts/default/token")
    assert answer.headers["Content-Type"].startswith("application/json")
    assert json.load(answer) == {"access_token": "ya29.sim-x", "expires_in": 3599, "token_type": "Bearer"}
    assert get(f"{base}/instance/service-accounts/default/email").read() == b"nodes-sa@local-p.iam.gserviceaccount.com"
    listed = get(f"{base}/instance/service-accounts/nodes-sa@local-p.iam.gserviceaccount.com/").read().decode()
    assert listed.split() == ["email", "scopes", "token"]
    recursive = json.load(get(f"{base}/instance/?recursive=true"))
    assert "token" not in recursive["serviceAccounts"]["default"] and "ya29" not in json.dumps(recursive)
