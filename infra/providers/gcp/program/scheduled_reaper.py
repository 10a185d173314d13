"""ScheduledReaper: the TTL's safety net that needs no laptop. A Cloud Function (the same
infra/providers/gcp/reaper.py that `trainctl reap` uses) runs on a Cloud Scheduler timer and deletes
trainctl's VMs, TPUs and GKE clusters whose expiry label has passed."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_gcp as gcp

from infra.providers.gcp.program.common import TYPE_PREFIX, child_opts
from infra.providers.gcp.program.network import region_of
from infra.spec.cluster import ClusterSpec

REAPER_SOURCE = Path(__file__).parent.parent / "reaper.py"
ENTRY = '''"""Cloud Function entry point: reap expired trainctl resources in this project."""
import os

import reaper


def reap(request):
    project = os.environ["REAP_PROJECT"]
    expired = reaper.find_expired(project, report=print)
    reaper.delete(project, expired, print)
    return f"reaped {len(expired)}"
'''
REQUIREMENTS = "google-cloud-compute>=1.20\ngoogle-cloud-tpu>=1.18\ngoogle-cloud-container>=2.40\n"
# What the reaper does, and nothing else: list, look at and delete VMs (an instance's boot disk
# is deleted with it), TPU nodes and queued resources, and GKE clusters. A custom role instead of
# instanceAdmin/tpu.admin/clusterAdmin, which could also set metadata (inject SSH keys) on every
# VM of the project. Permission names: https://cloud.google.com/iam/docs/permissions-reference
REAPER_PERMISSIONS = (
    "compute.instances.list", "compute.instances.get", "compute.instances.delete", "compute.disks.delete",
    "tpu.nodes.list", "tpu.nodes.get", "tpu.nodes.delete",
    "tpu.queuedResources.list", "tpu.queuedResources.get", "tpu.queuedResources.delete",
    "container.clusters.list", "container.clusters.get", "container.clusters.delete",
)
# What Cloud Build needs to build a function as a user-specified build service account (new
# projects' default build account may lack them since July 2024):
# https://cloud.google.com/functions/docs/securing/build-custom-sa
BUILD_PROJECT_ROLES = ("roles/logging.logWriter", "roles/artifactregistry.writer")
BUILD_SOURCE_ROLE = "roles/storage.objectViewer"  # on the stack's bucket, where the source is


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


def build_account_id(spec: ClusterSpec) -> str:
    return f"{spec.name[:21]}-build".strip("-")


def reaper_role_id(spec: ClusterSpec) -> str:
    """Custom role ids take letters, digits, '_' and '.', 3-64 characters."""
    return f"trainctlReaper_{spec.name.replace('-', '_')}"[:64]


def source_archive() -> dict[str, str]:
    return {"main.py": ENTRY, "reaper.py": REAPER_SOURCE.read_text(), "requirements.txt": REQUIREMENTS}


def source_object_name() -> str:
    """Named after its content: a changed reaper.py is a new object, which makes the function
    build again (an object of the same name would leave the deployed function as it was)."""
    digest = hashlib.sha256()
    for name, text in sorted(source_archive().items()):
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return f"trainctl-reaper/source-{digest.hexdigest()[:16]}.zip"


@dataclass(frozen=True)
class Site:
    """Where the reaper's resources go: their names' stem, the stack, its region, the bucket
    that holds the function's source, and the options that make them the component's children."""

    name: str
    spec: ClusterSpec
    project: str
    region: str
    bucket: pulumi.Input[str]
    child: pulumi.ResourceOptions


def _reaper_account(site: Site) -> gcp.serviceaccount.Account:
    """The account the function runs as, granted the reaper's custom role and nothing else."""
    name, spec = site.name, site.spec
    account = gcp.serviceaccount.Account(
        f"{name}-reaper-sa", account_id=reaper_account_id(spec),
        project=site.project, display_name=f"trainctl reaper of {spec.name}", opts=site.child)
    role = gcp.projects.IAMCustomRole(
        f"{name}-reaper-role", project=site.project, role_id=reaper_role_id(spec),
        title=f"trainctl reaper of {spec.name}", permissions=list(REAPER_PERMISSIONS), opts=site.child)
    # the role's full name, written out: its `name` output is only known once it exists
    gcp.projects.IAMMember(f"{name}-reaper-grant", project=site.project,
                           role=f"projects/{site.project}/roles/{reaper_role_id(spec)}", member=_member(account),
                           opts=pulumi.ResourceOptions.merge(site.child, pulumi.ResourceOptions(depends_on=[role])))
    return account


def _build_account(site: Site) -> tuple[gcp.serviceaccount.Account, list[pulumi.Resource]]:
    """The account Cloud Build builds the function as, and its grants (which the build awaits)."""
    name = site.name
    builder = gcp.serviceaccount.Account(
        f"{name}-reaper-build-sa", account_id=build_account_id(site.spec), project=site.project,
        display_name=f"builds the trainctl reaper of {site.spec.name}", opts=site.child)
    member = _member(builder)
    grants: list[pulumi.Resource] = [
        gcp.projects.IAMMember(f"{name}-reaper-build-{build_role.split('/')[-1]}", project=site.project,
                               role=build_role, member=member, opts=site.child)
        for build_role in BUILD_PROJECT_ROLES]
    grants.append(gcp.storage.BucketIAMMember(f"{name}-reaper-build-source", bucket=site.bucket,
                                              role=BUILD_SOURCE_ROLE, member=member, opts=site.child))
    return builder, grants


def _function(site: Site, labels: dict[str, str], account: gcp.serviceaccount.Account,
              builder: gcp.serviceaccount.Account, grants: list[pulumi.Resource]) -> gcp.cloudfunctionsv2.Function:
    source = gcp.storage.BucketObject(
        f"{site.name}-reaper-src", bucket=site.bucket, name=source_object_name(),
        source=pulumi.AssetArchive({path: pulumi.StringAsset(text)
                                    for path, text in source_archive().items()}), opts=site.child)
    return gcp.cloudfunctionsv2.Function(
        f"{site.name}-reaper", name=f"{site.spec.name}-reaper", project=site.project, location=site.region,
        labels=labels,
        build_config=gcp.cloudfunctionsv2.FunctionBuildConfigArgs(
            runtime="python311", entry_point="reap",
            service_account=pulumi.Output.concat("projects/", site.project, "/serviceAccounts/", builder.email),
            source=gcp.cloudfunctionsv2.FunctionBuildConfigSourceArgs(
                storage_source=gcp.cloudfunctionsv2.FunctionBuildConfigSourceStorageSourceArgs(
                    bucket=site.bucket, object=source.name))),
        service_config=gcp.cloudfunctionsv2.FunctionServiceConfigArgs(
            max_instance_count=1, timeout_seconds=300, ingress_settings="ALLOW_INTERNAL_ONLY",
            service_account_email=account.email,
            environment_variables={"REAP_PROJECT": site.project}),
        # built only once its build account holds what the build needs (else a first
        # build races the grants: "Permission artifactregistry.repositories.uploadArtifacts denied")
        opts=pulumi.ResourceOptions.merge(site.child, pulumi.ResourceOptions(depends_on=grants)))


def _schedule(site: Site, function: gcp.cloudfunctionsv2.Function,
              account: gcp.serviceaccount.Account) -> gcp.cloudscheduler.Job:
    """The timer that invokes the function as the reaper's account, every 15 minutes."""
    service = function.service_config.apply(_service_field("service"))
    uri = function.service_config.apply(_service_field("uri"))
    # A 2nd-gen function is a Cloud Run service: invoking it takes run.invoker on that service.
    gcp.cloudrunv2.ServiceIamMember(
        f"{site.name}-reaper-invoker", project=site.project, location=site.region, name=service,
        role="roles/run.invoker", member=_member(account), opts=site.child)
    return gcp.cloudscheduler.Job(
        f"{site.name}-reaper-schedule", name=f"{site.spec.name}-reaper", project=site.project,
        region=site.region, schedule="*/15 * * * *", time_zone="Etc/UTC",
        http_target=gcp.cloudscheduler.JobHttpTargetArgs(
            uri=uri, http_method="POST",
            oidc_token=gcp.cloudscheduler.JobHttpTargetOidcTokenArgs(
                service_account_email=account.email, audience=uri)),
        opts=site.child)


def _member(account: gcp.serviceaccount.Account) -> pulumi.Output[str]:
    return account.email.apply(lambda e: f"serviceAccount:{e}")


class ScheduledReaper(pulumi.ComponentResource):
    def __init__(self, name: str, spec: ClusterSpec, bucket: pulumi.Input[str],
                 labels: dict[str, str], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{TYPE_PREFIX}:ScheduledReaper", name, None, opts)
        assert spec.zone and spec.project
        site = Site(name, spec, spec.project, region_of(spec.zone), bucket, child_opts(self, opts))
        account = _reaper_account(site)
        builder, grants = _build_account(site)
        self.function = _function(site, labels, account, builder, grants)
        self.job = _schedule(site, self.function, account)
        self.register_outputs({"function": self.function.name})


def left_by_cloud_functions(spec: ClusterSpec) -> str:
    """What deploying the function made that outlives it: Cloud Functions keeps build images
    in the region's `gcf-artifacts` Artifact Registry repository (and may stage sources in its
    gcf-v2-sources-<number>-<region> bucket), shared by every function of the project there
    (https://cloud.google.com/functions/docs/building), so `down` leaves them."""
    assert spec.zone
    region = region_of(spec.zone)
    return (f"Cloud Functions keeps the reaper's build image in the Artifact Registry repository "
            f"gcf-artifacts ({region}) and may keep its source in a gcf-v2-sources-* bucket, "
            f"shared by every function of project {spec.project} in {region}; trainctl leaves them. "
            f"If no other function uses them: `gcloud artifacts docker images list "
            f"{region}-docker.pkg.dev/{spec.project}/gcf-artifacts` and "
            f"`gcloud storage ls --project {spec.project}`.")
