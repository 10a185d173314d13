"""A small pulumi-gcp project for tests of the simulator's pulumi against the GCP simulator: a
kept bucket, a network with a subnetwork, a firewall, a service account and an instance, all
through the provider the program's endpoint setting declares (infra/providers/gcp/program/endpoints.py), so the
provider stand-in sends real REST calls to the simulator. What the program declares on its next
run comes from program.json (`declare`); `calls` are the requests the simulator answered."""

from __future__ import annotations

import json
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from infra.spec import catalog
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from gcpsim.pulumi import write_launcher

PROGRAM = '''
import json
from pathlib import Path

import pulumi
import pulumi_gcp as gcp

from infra.providers.gcp.program.endpoints import api_provider

spec = json.loads(Path("program.json").read_text())
provider = api_provider()
p = spec["prefix"]
project = spec["project"]
bucket = gcp.storage.Bucket(
    f"{p}-bucket", name=spec["bucket"], project=project, location="US-CENTRAL1",
    uniform_bucket_level_access=True, labels=spec.get("bucket_labels", {}),
    opts=pulumi.ResourceOptions(provider=provider, retain_on_delete=True, import_=spec.get("import_bucket"),
                                ignore_changes=spec.get("bucket_ignore_changes")))
net = gcp.compute.Network(f"{p}-vpc", name=f"{p}-vpc", project=project, auto_create_subnetworks=False,
                          opts=pulumi.ResourceOptions(provider=provider))
subnet = gcp.compute.Subnetwork(f"{p}-subnet", name=f"{p}-subnet", project=project, region="us-central1",
                                network=net.id, ip_cidr_range="10.128.0.0/20",
                                opts=pulumi.ResourceOptions(provider=provider))
gcp.compute.Firewall(f"{p}-fw", name=f"{p}-fw", project=project, network=net.id, direction="INGRESS",
                     allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
                     source_ranges=spec.get("ssh_from", ["203.0.113.0/24"]),
                     opts=pulumi.ResourceOptions(provider=provider))
account = gcp.serviceaccount.Account(f"{p}-sa", account_id=f"{p}-sa", project=project, display_name=p,
                                     opts=pulumi.ResourceOptions(provider=provider))
if spec.get("instance", True):
    vm = gcp.compute.Instance(
        f"{p}-vm", name=f"{p}-vm", project=project, zone="us-central1-a", machine_type=spec["machine_type"],
        boot_disk=gcp.compute.InstanceBootDiskArgs(initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
            image=spec["image"], size=spec.get("disk_gb", 20))),
        network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
            subnetwork=subnet.id, access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()])],
        labels=spec.get("vm_labels", {}), metadata={"enable-oslogin": "FALSE"},
        service_account=gcp.compute.InstanceServiceAccountArgs(email=account.email, scopes=["cloud-platform"]),
        allow_stopping_for_update=True,
        scheduling=gcp.compute.InstanceSchedulingArgs(**spec["scheduling"]) if spec.get("scheduling") else None,
        opts=pulumi.ResourceOptions(provider=provider, custom_timeouts=pulumi.CustomTimeouts(
            create=spec.get("create_timeout"), update=spec.get("update_timeout"))))
    pulumi.export("internal_ip", vm.network_interfaces[0].network_ip)
    pulumi.export("external_ip", vm.network_interfaces[0].access_configs[0].nat_ip)
pulumi.export("bucket_url", bucket.url)
'''


class GcpProject:
    def __init__(self, root: Path, sim_url: str, project: str, prefix: str, server: Path | None = None) -> None:
        self.root = root / "project"
        self.root.mkdir(parents=True)
        (self.root / "Pulumi.yaml").write_text("name: simtest\nruntime: python\n")
        (self.root / "__main__.py").write_text(textwrap.dedent(PROGRAM))
        self.backend = root / "backend"
        self.backend.mkdir()
        self.cli = root / "cli"
        write_launcher(self.cli / "bin", server=server)
        self.sim_url = sim_url
        self.base: dict[str, Any] = {"prefix": prefix, "project": project, "bucket": f"{project}-{prefix}-kept",
                                     "machine_type": "n1-standard-2", "image": catalog.IMAGE_CPU_DEFAULT}
        self.declare()

    def declare(self, **changes: Any) -> None:
        (self.root / "program.json").write_text(json.dumps({**self.base, **changes}))

    def stack(self, name: str) -> Any:
        from pulumi import automation as auto

        env = {"PULUMI_BACKEND_URL": f"file://{self.backend}", "PULUMI_CONFIG_PASSPHRASE": "simulated",
               "PULUMI_HOME": str(self.cli / "home"), API_ENDPOINT_ENV: self.sim_url}
        return auto.create_or_select_stack(stack_name=name, work_dir=str(self.root), opts=auto.LocalWorkspaceOptions(
            env_vars=env, pulumi_command=auto.PulumiCommand(root=str(self.cli))))


@contextmanager
def recorded_requests(simulator: Any) -> Iterator[list[tuple[str, str]]]:
    """Every request the (in-process) simulator answers meanwhile, as (verb, path)."""
    seen: list[tuple[str, str]] = []
    original = simulator.handle

    def recording(verb: str, target: str, raw: bytes, headers: dict[str, str]) -> Any:
        seen.append((verb, target.split("?")[0]))
        return original(verb, target, raw, headers)

    simulator.handle = recording
    try:
        yield seen
    finally:
        simulator.handle = original


def mutations(seen: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The requests that change something (a getIamPolicy is a POST that only reads)."""
    return [c for c in seen if c[0] != "GET" and not c[1].endswith(":getIamPolicy")]
