"""A simulated VM's account acts through the token its metadata server hands out, with what IAM
grants it and nothing more: a custom role under a condition naming one VM lets that VM be read and
relabelled; relabelling another VM, or deleting one, is Compute's 403. Calls without a machine's
token are the controller's, as before."""

from __future__ import annotations

from gcpsim.apis.access_tokens import condition_holds
from tests.fakes.sim_compute import PROJECT, ZONE, ComputeSim, csim, instance_body, make_csim  # noqa: F401

ACCOUNT = f"nodes-sa@{PROJECT}.iam.gserviceaccount.com"
RUNS_AS = [{"email": ACCOUNT, "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]
ROLE = f"projects/{PROJECT}/roles/idleWatch"


def _grant_relabel_of(sim: ComputeSim, instance: str) -> None:
    sim.running.enable("iam.googleapis.com", "cloudresourcemanager.googleapis.com")
    for path, body in (
            (f"/v1/projects/{PROJECT}/serviceAccounts", {"accountId": "nodes-sa"}),
            (f"/v1/projects/{PROJECT}/roles", {"roleId": "idleWatch", "role": {
                "title": "t", "includedPermissions": ["compute.instances.get", "compute.instances.setLabels"]}})):
        status, answer = sim.http("POST", path, body)
        assert status == 200, answer
    policy = sim.http("POST", f"/v1/projects/{PROJECT}:getIamPolicy", {})[1]
    condition = {"title": "one VM", "expression": 'resource.type == "compute.googleapis.com/Instance" && '
                 f'(resource.name == "projects/{PROJECT}/zones/{ZONE}/instances/{instance}")'}
    status, answer = sim.http("POST", f"/v1/projects/{PROJECT}:setIamPolicy", {"policy": {
        "etag": policy["etag"], "version": 3,
        "bindings": [{"role": ROLE, "members": [f"serviceAccount:{ACCOUNT}"], "condition": condition}]}})
    assert status == 200, answer


def test_a_machines_token_may_do_what_its_account_is_granted_and_nothing_else(csim):
    csim.network()
    _grant_relabel_of(csim, "vm-0")
    for name in ("vm-0", "vm-1"):
        assert csim.http("POST", csim.compute(f"zones/{ZONE}/instances"), instance_body(name, serviceAccounts=RUNS_AS))[0] == 200
    token = csim.backend.machines[f"{PROJECT}/{ZONE}/vm-0"].access_token
    assert token and token == csim.backend.machines[f"{PROJECT}/{ZONE}/vm-1"].access_token  # one per account
    auth = {"Authorization": f"Bearer {token}"}

    def as_machine(verb: str, path: str, body=None):
        return csim.running.http(verb, csim.compute(f"zones/{ZONE}/instances/{path}"), body, headers=auth)

    status, vm0 = as_machine("GET", "vm-0")
    assert status == 200
    relabel = {"labels": {**vm0["labels"], "trainctl-expires": "1"}, "labelFingerprint": vm0["labelFingerprint"]}
    assert as_machine("POST", "vm-0/setLabels", relabel)[0] == 200
    status, refused = as_machine("POST", "vm-1/setLabels", relabel)
    assert status == 403
    assert refused["error"]["message"] == (f"Required 'compute.instances.setLabels' permission for "
                                           f"'projects/{PROJECT}/zones/{ZONE}/instances/vm-1'")
    assert refused["error"]["errors"][0]["reason"] == "forbidden"
    assert as_machine("DELETE", "vm-0")[0] == 403  # relabelling is no right to delete
    assert csim.http("DELETE", csim.compute(f"zones/{ZONE}/instances/vm-1"))[0] == 200  # the controller's call


def test_a_condition_is_read_as_iam_reads_its_resource_attributes_and_anything_else_grants_nothing():
    vm = {"type": "compute.googleapis.com/Instance", "name": "projects/p/zones/z/instances/s-node-1"}
    assert condition_holds('resource.name == "projects/p/zones/z/instances/s-node-0" || '
                           '(resource.type == "compute.googleapis.com/Instance" && '
                           'resource.name.startsWith("projects/p/zones/z/instances/s-"))', vm)
    assert not condition_holds('resource.name == "projects/p/zones/z/instances/s-node-0"', vm)
    assert not condition_holds('request.time < timestamp("2030-01-01T00:00:00Z")', vm)  # not read here
