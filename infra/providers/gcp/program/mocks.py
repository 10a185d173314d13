"""Evaluate the Pulumi program offline with Pulumi's own mocks (no CLI, no credentials).

`trainctl plan` uses it to list exactly the resources `pulumi up` would declare; the tests use
it to assert on them. The mocks echo inputs and add the outputs GCP would compute (addresses,
endpoints, e-mails), keyed by resource type, so the program's output logic runs for real.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pulumi

from infra.spec.cluster import ClusterSpec

_ids = itertools.count(1)


@dataclass
class Declared:
    type: str
    name: str
    inputs: dict[str, Any]
    parent: str | None = None


@dataclass
class RecordingMocks(pulumi.runtime.Mocks):
    resources: list[Declared] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        n = next(_ids)
        outputs = dict(args.inputs)
        typ = args.typ
        if typ == "gcp:compute/instance:Instance":
            nics = [dict(nic) for nic in outputs.get("networkInterfaces", [])]
            for nic in nics:
                nic["networkIp"] = f"10.128.0.{n % 250 + 2}"
                nic["accessConfigs"] = [{**ac, "natIp": f"203.0.113.{n % 250 + 2}"}
                                        for ac in nic.get("accessConfigs", [])]
            outputs["networkInterfaces"] = nics
        elif typ == "gcp:tpu/v2Vm:V2Vm":
            from infra.spec import catalog

            hosts = catalog.TPUS[outputs["acceleratorType"]].hosts
            external = outputs.get("networkConfig", {}).get("enableExternalIps", False)
            outputs["networkEndpoints"] = [
                {"ipAddress": f"10.128.1.{i + 2}", "port": 8470,
                 "accessConfigs": [{"externalIp": f"198.51.100.{i + 2}"}] if external else []}
                for i in range(hosts)]
        elif typ == "gcp:serviceaccount/account:Account":
            outputs["email"] = f"{outputs['accountId']}@{outputs.get('project', 'p')}.iam.gserviceaccount.com"
        elif typ == "gcp:container/cluster:Cluster":
            outputs["endpoint"] = "192.0.2.10"
            outputs["masterAuth"] = {"clusterCaCertificate": "Q0EtREFUQQ=="}
        elif typ == "gcp:cloudfunctionsv2/function:Function":
            # GCP creates the Cloud Run service behind a 2nd-gen function and reports it here.
            config = dict(outputs.get("serviceConfig", {}))
            config["service"] = f"projects/{outputs.get('project')}/locations/{outputs.get('location')}/services/{outputs.get('name')}"
            config["uri"] = f"https://{outputs.get('name')}-mock.a.run.app"
            outputs["serviceConfig"] = config
        elif typ == "gcp:storage/bucket:Bucket":
            outputs.setdefault("url", f"gs://{outputs.get('name')}")
        elif typ == "gcp:compute/resourcePolicy:ResourcePolicy":
            outputs["selfLink"] = (f"https://www.googleapis.com/compute/v1/projects/{outputs.get('project')}"
                                   f"/regions/{outputs.get('region')}/resourcePolicies/{outputs.get('name')}")
        elif typ == "gcp:artifactregistry/repository:Repository":
            outputs["name"] = outputs["repositoryId"]  # the provider's output, e.g. "repo1"
        self.resources.append(Declared(typ, args.name, dict(args.inputs)))
        return f"{args.name}-id-{n}", outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}

    def of_type(self, suffix: str) -> list[Declared]:
        return [r for r in self.resources if r.type.endswith(suffix)]


@dataclass
class Evaluation:
    resources: list[Declared]
    outputs: dict[str, Any]
    secret_outputs: set[str] = field(default_factory=set)

    def of_type(self, suffix: str) -> list[Declared]:
        return [r for r in self.resources if r.type.endswith(suffix)]


def evaluate(spec: ClusterSpec, public_key: str | None = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMOCK",
             expires_at: int | None = 1_900_000_000) -> Evaluation:
    """Run the program under mocks; returns every declared resource and the resolved outputs."""
    from infra.providers.gcp.program.cluster import build

    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="trainctl", stack=spec.name, preview=False)
    resolved: dict[str, Any] = {}
    secret: set[str] = set()

    @pulumi.runtime.test
    def run():
        outputs = build(spec, public_key, expires_at)
        keys = list(outputs)
        secrecy = [pulumi.Output.from_input(pulumi.Output.from_input(outputs[k]).is_secret())
                   for k in keys]
        return pulumi.Output.all(*[outputs[k] for k in keys], *secrecy).apply(
            lambda values: (resolved.update(dict(zip(keys, values))),
                            secret.update(k for k, s in zip(keys, values[len(keys):]) if s)))

    run()
    return Evaluation(mocks.resources, resolved, secret)
