"""Cloud Storage's constraints: trainctl's buckets can be removed with their objects (or are kept
on purpose, and say so in a label), and bucket names follow Cloud Storage's naming rules."""

from __future__ import annotations

from typing import Iterator, Sequence

from infra.spec.cluster_sections import bucket_name_problems
from policy.declared import BUCKET_IAM, T_BUCKET, Resource, is_trainctl, labels_of

# Marker label for a bucket that a named stack keeps on purpose. Pulumi's policy engine does not
# show resource options like retainOnDelete to policies (its AnalyzerResourceOptions carry only
# protect, ignoreChanges, deleteBeforeReplace, aliases, timeouts, secret outputs, parent), so a
# bucket created with retain_on_delete=True must also say so in a label the engine can see.
RETAIN_LABEL = "trainctl-retain"


def bucket_removable(r: Resource) -> Iterator[str]:
    if r.type != T_BUCKET or not is_trainctl(r.props):
        return
    kept = r.opts.get("retainOnDelete") is True or labels_of(r.props).get(RETAIN_LABEL) == "true"
    if r.props.get("forceDestroy") is not True and not kept:
        yield (f"bucket {r.props.get('name', r.name)!r} has forceDestroy "
               f"{r.props.get('forceDestroy', 'unset (false)')}: a bucket that holds objects cannot "
               "be deleted, so `trainctl down` would fail; set force_destroy=True, or keep it on "
               f"purpose with retain_on_delete=True and the label {RETAIN_LABEL}=true")


def bucket_name(r: Resource) -> Iterator[str]:
    if r.type != T_BUCKET:
        return
    name = r.props.get("name")
    if isinstance(name, str):  # unknown during a preview: the engine checks it again at update
        for problem in bucket_name_problems(name):
            yield f"bucket name {name!r} {problem}: set trainctl:bucket.name to a valid name"


# Enough to list and read objects, which is all staging and Cloud Storage FUSE read-only do.
FOREIGN_BUCKET_ROLES = ("roles/storage.objectViewer",)


def foreign_buckets_read_only(resources: Sequence[Resource]) -> Iterator[tuple[str, str]]:
    """A stack may write only the bucket it creates; buckets it reads (data inputs) are someone
    else's, and a broader grant there would outlive nothing but the stack's account."""
    own = {r.props.get("name") for r in resources if r.type == T_BUCKET}
    for r in resources:
        bucket, role = r.props.get("bucket"), r.props.get("role")
        if r.type in BUCKET_IAM and isinstance(bucket, str) and bucket not in own and role not in FOREIGN_BUCKET_ROLES:
            yield (r.name, f"grants {role} on bucket {bucket!r}, which this stack does not create: "
                           f"grant {' or '.join(FOREIGN_BUCKET_ROLES)} (read objects) there, nothing broader")
