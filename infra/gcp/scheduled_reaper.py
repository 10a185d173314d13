"""ScheduledReaper: the TTL's safety net that needs no laptop. A Cloud Function (the same
infra/gcp/reaper.py that `trainctl reap` uses) runs on a Cloud Scheduler timer and deletes
trainctl's VMs, TPUs and GKE clusters whose expiry label has passed."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_gcp as gcp

from infra.gcp.common import TYPE_PREFIX, child_opts
from infra.gcp.network import region_of
from infra.spec import ClusterSpec

REAPER_SOURCE = Path(__file__).with_name("reaper.py")
ENTRY = '''"""Cloud Function entry point: reap expired trainctl resources in this project."""
import os

import reaper


def reap(request):
    project = os.environ["REAP_PROJECT"]
    expired = reaper.find_expired(project)
    reaper.delete(project, expired, print)
    return f"reaped {len(expired)}"
'''
REQUIREMENTS = "google-cloud-compute>=1.20\ngoogle-cloud-tpu>=1.18\ngoogle-cloud-container>=2.40\n"
# Roles the reaper needs to list and delete VMs, TPU nodes (queued ones too) and GKE clusters,
# and nothing else.
REAPER_ROLES = ("roles/compute.instanceAdmin.v1", "roles/tpu.admin", "roles/container.clusterAdmin")


def _service_field(name: str):
    """Read a field GCP fills in on the function's Cloud Run service (its name or its URI)."""
    def read(config) -> str:
        value = getattr(config, name, None) if config is not None else None
        if value is None:
            raise ValueError(f"the reaper function reports no service_config.{name}")
        return str(value)
    return read


def reaper_account_id(spec: ClusterSpec) -> str:
    return f"{spec.name[:20]}-reaper".strip("-")


class ScheduledReaper(pulumi.ComponentResource):
    def __init__(self, name: str, spec: ClusterSpec, bucket: pulumi.Input[str],
                 labels: dict[str, str], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{TYPE_PREFIX}:ScheduledReaper", name, None, opts)
        child = child_opts(self, opts)
        assert spec.zone and spec.project
        region = region_of(spec.zone)
        account = gcp.serviceaccount.Account(
            f"{name}-reaper-sa", account_id=reaper_account_id(spec),
            project=spec.project, display_name=f"trainctl reaper of {spec.name}", opts=child)
        member = account.email.apply(lambda e: f"serviceAccount:{e}")
        for role in REAPER_ROLES:
            gcp.projects.IAMMember(f"{name}-reaper-{role.split('/')[-1]}", project=spec.project,
                                   role=role, member=member, opts=child)
        source = gcp.storage.BucketObject(
            f"{name}-reaper-src", bucket=bucket, name="trainctl-reaper/source.zip",
            source=pulumi.AssetArchive({
                "main.py": pulumi.StringAsset(ENTRY),
                "reaper.py": pulumi.FileAsset(str(REAPER_SOURCE)),
                "requirements.txt": pulumi.StringAsset(REQUIREMENTS),
            }), opts=child)
        self.function = gcp.cloudfunctionsv2.Function(
            f"{name}-reaper", name=f"{spec.name}-reaper", project=spec.project, location=region,
            labels=labels,
            build_config=gcp.cloudfunctionsv2.FunctionBuildConfigArgs(
                runtime="python311", entry_point="reap",
                source=gcp.cloudfunctionsv2.FunctionBuildConfigSourceArgs(
                    storage_source=gcp.cloudfunctionsv2.FunctionBuildConfigSourceStorageSourceArgs(
                        bucket=bucket, object=source.name))),
            service_config=gcp.cloudfunctionsv2.FunctionServiceConfigArgs(
                max_instance_count=1, timeout_seconds=300, ingress_settings="ALLOW_INTERNAL_ONLY",
                service_account_email=account.email,
                environment_variables={"REAP_PROJECT": spec.project}),
            opts=child)
        service = self.function.service_config.apply(_service_field("service"))
        uri = self.function.service_config.apply(_service_field("uri"))
        # A 2nd-gen function is a Cloud Run service: invoking it takes run.invoker on that service.
        gcp.cloudrunv2.ServiceIamMember(
            f"{name}-reaper-invoker", project=spec.project, location=region, name=service,
            role="roles/run.invoker", member=member, opts=child)
        self.job = gcp.cloudscheduler.Job(
            f"{name}-reaper-schedule", name=f"{spec.name}-reaper", project=spec.project,
            region=region, schedule="*/15 * * * *", time_zone="Etc/UTC",
            http_target=gcp.cloudscheduler.JobHttpTargetArgs(
                uri=uri, http_method="POST",
                oidc_token=gcp.cloudscheduler.JobHttpTargetOidcTokenArgs(
                    service_account_email=account.email, audience=uri)),
            opts=child)
        self.register_outputs({"function": self.function.name})
