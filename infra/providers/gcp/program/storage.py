"""Storage: the bucket that holds job dirs, checkpoints and metrics."""

from __future__ import annotations

import os

import pulumi
import pulumi_gcp as gcp

from infra.providers.gcp.program.common import TYPE_PREFIX, child_opts
from infra.spec.cluster import ClusterSpec


def bucket_name(spec: ClusterSpec) -> str:
    # Bucket names are global: the project id keeps ours from colliding with others'.
    # Cut at GCS's 63 characters, the name must still end with a letter or digit.
    return spec.bucket.name or f"{spec.project}-{spec.name}-trainctl"[:63].rstrip("-_")


def kept_on_down(spec: ClusterSpec) -> bool:
    return not spec.ephemeral


# Set by trainctl's `up` when the stack's kept bucket exists but its Pulumi state does not hold
# it (an earlier `down` left it on purpose): the bucket is adopted instead of created again,
# which GCS would refuse (409, "you already own it").
ADOPT_ENV = "TRAINCTL_ADOPT_BUCKET"


def adoption(spec: ClusterSpec) -> pulumi.ResourceOptions:
    """Pulumi's import is strict (what the program declares must match the bucket), so the
    labels, whose expiry differs from the kept bucket's, are ignored while importing; the next
    `up` writes them (https://www.pulumi.com/docs/iac/adopting-pulumi/import/)."""
    if os.environ.get(ADOPT_ENV) != bucket_name(spec):
        return pulumi.ResourceOptions()
    return pulumi.ResourceOptions(import_=bucket_name(spec), ignore_changes=["labels"])


class Storage(pulumi.ComponentResource):
    def __init__(self, name: str, spec: ClusterSpec, labels: dict[str, str],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{TYPE_PREFIX}:Storage", name, None, opts)
        child = child_opts(self, opts)
        self.bucket = gcp.storage.Bucket(
            f"{name}-bucket",
            name=bucket_name(spec),
            project=spec.project,
            location=spec.bucket.location,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            # Ephemeral stacks go with their objects; a named stack's bucket outlives `down`
            # on purpose (retain_on_delete below), so destroy never fails on checkpoints.
            force_destroy=spec.ephemeral,
            # The label says "kept on down" to the plan, the policy pack and whoever finds it later.
            labels={**labels, "trainctl-retain": "true"} if kept_on_down(spec) else labels,
            lifecycle_rules=[gcp.storage.BucketLifecycleRuleArgs(
                action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                condition=gcp.storage.BucketLifecycleRuleConditionArgs(age=spec.bucket.retention_days),
            )],
            opts=pulumi.ResourceOptions.merge(
                pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(retain_on_delete=kept_on_down(spec))),
                adoption(spec)),
        )
        self.uri = self.bucket.name.apply(lambda n: f"gs://{n}")
        self.register_outputs({"uri": self.uri})


DATA_READER_ROLE = "roles/storage.objectViewer"  # list and read objects: all staging and gcsfuse need


def grant_data_readers(spec: ClusterSpec, member: pulumi.Input[str],
                       opts: pulumi.ResourceOptions) -> list[gcp.storage.BucketIAMMember]:
    """The nodes' account may read the buckets an experiment's `data:` names (bucket-level, one
    member each): buckets trainctl did not create, so it may only read them, and its `down`
    removes the grant, never the bucket."""
    return [gcp.storage.BucketIAMMember(f"{spec.name}-sa-data-{bucket}", bucket=bucket, role=DATA_READER_ROLE,
                                        member=member, opts=opts)
            for bucket in spec.data_buckets]
