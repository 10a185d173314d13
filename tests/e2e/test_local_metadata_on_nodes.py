"""Every local node has GCE's metadata server at its GCE address and name: its own instance's
values only, guest attributes it published at boot, and the host keys trainctl pins come from
there (the path GCP takes), not from a local shortcut."""

from __future__ import annotations

import json

import pytest

from conftest import reach
from namespace_nodes import metadata_admin
from infra.providers.local.instance_metadata import metadata_admin_for
from infra.providers.local.layout import Names
from tests.e2e.test_local_stack import ssh_run

pytestmark = pytest.mark.e2e

CURL = "curl -sS -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/"


def test_each_node_reads_its_own_instance_from_the_metadata_server(local_stack):
    inv = local_stack("meta", nodes=2)
    for i, node in enumerate(inv.nodes):
        assert ssh_run(inv, i, CURL + "instance/name") == node.name
        assert ssh_run(inv, i, CURL + "instance/network-interfaces/0/ip") == node.internal_ip
        tree = json.loads(ssh_run(inv, i, CURL + "instance/?recursive=true"))
        assert tree["preempted"] == "FALSE" and tree["attributes"]["trainctl-stack"] == "meta"
        # the same server at the link-local address, and the flavor header is required
        assert ssh_run(inv, i, "curl -s -o /dev/null -w '%{http_code}' "
                               "http://169.254.169.254/computeMetadata/v1/instance/name") == "403"
    # the host keys trainctl pinned are those the nodes published as guest attributes
    admin = metadata_admin_for("meta")
    for node in inv.nodes:
        items = metadata_admin.guest_attributes(admin, node.name, "hostkeys/")["queryValue"]["items"]
        assert [f"{i['key']} {i['value']}" for i in items] == list(node.host_keys)


def test_the_controller_side_is_closed_to_nodes(local_stack):
    inv = local_stack("metaadm", nodes=1)
    bucket = metadata_admin_for("metaadm").removeprefix("http://").split(":")[0]
    assert reach(Names("metaadm").node_netns(0), bucket, 8089).startswith("blocked")
    assert reach(None, bucket, 8089).startswith("open")
