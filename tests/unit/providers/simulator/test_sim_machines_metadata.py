"""What the GCP simulator's machines need of the metadata server beyond the local stack's:
metadata changed while a VM runs (instances.setMetadata, project metadata), instances that
share a name in different zones, external addresses and tags, deleted instances. On loopback,
with the local stack's server fixture (the node is 127.0.0.1)."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request

import pytest

from namespace_nodes import metadata_admin
from tests.unit.providers.local.test_local_metadata_server import NODE, get, server  # noqa: F401  (the fixture)


def test_changed_metadata_reaches_the_node_and_wakes_its_watchers_keeping_guest_attributes(server):  # noqa: F811
    base, admin = server
    published = urllib.request.Request(f"{base}/instance/guest-attributes/hostkeys/ssh-ed25519", data=b"AAAA",
                                       method="PUT", headers={"Metadata-Flavor": "Google"})
    urllib.request.urlopen(published, timeout=10).close()  # what the node does as it boots
    woke: list[str] = []
    first = get(f"{base}/?recursive=true")
    watcher = threading.Thread(target=lambda: woke.append(get(
        f"{base}/?recursive=true&wait_for_change=true&timeout_sec=20"
        f"&last_etag={first.headers['ETag']}").read().decode()))
    watcher.start()
    metadata_admin.set_attributes(admin, "node0", {"ssh-keys": "alice:ssh-ed25519 AAAA alice"})
    watcher.join(timeout=20)
    assert json.loads(woke[0])["instance"]["attributes"] == {"ssh-keys": "alice:ssh-ed25519 AAAA alice"}
    items = metadata_admin.guest_attributes(admin, "node0", "hostkeys/")["queryValue"]["items"]
    assert items == [{"namespace": "hostkeys", "key": "ssh-ed25519", "value": "AAAA"}]


def test_project_metadata_is_served_to_the_nodes(server):  # noqa: F811
    base, admin = server
    metadata_admin.set_project_attributes(admin, {"ssh-keys": "bob:ssh-ed25519 BBBB"})
    assert get(f"{base}/project/attributes/ssh-keys").read() == b"bob:ssh-ed25519 BBBB"


def test_a_deleted_instance_is_gone_for_node_and_controller(server):  # noqa: F811
    base, admin = server
    metadata_admin.remove(admin, "node0")
    with pytest.raises(urllib.error.HTTPError) as asked:
        get(f"{base}/instance/name")
    assert asked.value.code == 404
    with pytest.raises(urllib.error.HTTPError):
        metadata_admin.instance(admin, "node0")


def node_get(base: str, source: str, path: str) -> str:
    host, port = base.split("//")[1].split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10, source_address=(source, 0))
    conn.request("GET", f"/computeMetadata/v1/{path}", headers={"Metadata-Flavor": "Google"})
    return conn.getresponse().read().decode()


def test_instances_sharing_a_name_in_two_zones_are_known_by_their_handles(server):  # noqa: F811
    base, admin = server
    for handle, ip, zone in (("h1", "127.0.0.2", "us-central1-a"), ("h2", "127.0.0.3", "us-east1-b")):
        metadata_admin.boot(admin, {**NODE, "name": "vm", "ip": ip, "zone": zone, "tags": ["ssh"],
                                    "external-ip": f"10.213.0.{ip[-1]}", "network": "default"}, handle)
    assert metadata_admin.instance(admin, "h1")["zone"].endswith("us-central1-a")
    assert metadata_admin.instance(admin, "h2")["zone"].endswith("us-east1-b")
    assert node_get(base, "127.0.0.3", "instance/hostname") == "vm.us-east1-b.c.local-p.internal"
    assert node_get(base, "127.0.0.3", "instance/network-interfaces/0/access-configs/0/external-ip") == "10.213.0.3"
    assert json.loads(node_get(base, "127.0.0.2", "instance/tags")) == ["ssh"]
