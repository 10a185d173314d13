"""GCP's documented constraints, one rule each, as plain functions over what the Pulumi engine
declares: a resource's type token and its input properties (camelCase keys, as the engine and
infra/providers/gcp/program/mocks.py give them).

Why plain functions: the same rules run in three places — Pulumi's policy engine (policy/
__main__.py wraps them in pulumi_policy objects), `trainctl plan` (over the program evaluated
under mocks, before anything is created) and the tests — and only the first has an engine.

Every rule is mandatory: each one describes a request GCP refuses, or a stack that `trainctl
down` could not remove, or an exposure we never want; none is a matter of taste.

The checks themselves live by the part of GCP they constrain (gke_rules, compute_rules,
storage_rules, label_rules, service_rules) and read resources through policy.declared; this
module names each rule, cites its GCP page and runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from policy import compute_rules, consumption_rules, gke_rules, gpudirect_rules, iam_rules, label_rules, service_rules, storage_rules
from policy.declared import Resource

ENFORCEMENT = "mandatory"


@dataclass(frozen=True)
class Violation:
    rule: str
    resource: str
    message: str
    url: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.resource}: {self.message} (see {self.url})"


ResourceCheck = Callable[[Resource], Iterable[str]]
StackCheck = Callable[[Sequence[Resource]], Iterable[tuple[str, str]]]


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    url: str
    # Exactly one of these: a check of one resource (yields messages) or of the whole stack
    # (yields (resource name, message) pairs).
    check: ResourceCheck | None = None
    stack_check: StackCheck | None = None
    enforcement: str = ENFORCEMENT

    def run(self, resources: Sequence[Resource]) -> list[Violation]:
        out: list[Violation] = []
        if self.check is not None:
            for r in resources:
                out += [Violation(self.name, r.name, m, self.url) for m in self.check(r)]
        if self.stack_check is not None:
            out += [Violation(self.name, n, m, self.url) for n, m in self.stack_check(resources)]
        return out


RULES: tuple[Rule, ...] = (
    Rule("gke-release-channel-auto-upgrade",
         "GKE node pools of a cluster enrolled in a release channel must keep auto-upgrade on.",
         "https://cloud.google.com/kubernetes-engine/docs/how-to/node-auto-upgrades",
         stack_check=gke_rules.stack_release_channel_auto_upgrade),
    Rule("gke-cluster-deletable",
         "trainctl's GKE clusters must be deletable by `trainctl down` (deletionProtection false).",
         "https://cloud.google.com/kubernetes-engine/docs/how-to/deleting-a-cluster",
         check=gke_rules.cluster_deletable),
    Rule("gke-name-length",
         "GKE cluster and node pool names have at most 40 characters.",
         "https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#Cluster",
         check=gke_rules.gke_name_length),
    Rule("gke-tpu-multihost-node-count",
         "A multi-host TPU slice node pool's node count equals its topology's host count.",
         "https://cloud.google.com/kubernetes-engine/docs/concepts/tpus",
         check=gke_rules.tpu_pool_node_count),
    Rule("gke-flex-start-pool",
         "A flex-start GKE node pool is autoscaled (no static size), with auto-repair off and no reservation.",
         "https://cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training",
         check=gke_rules.flex_start_pool),
    Rule("bucket-removable",
         "trainctl's buckets must be removable with their objects (forceDestroy), or kept on "
         "purpose (retainOnDelete + trainctl-retain label).",
         "https://cloud.google.com/storage/docs/deleting-buckets",
         check=storage_rules.bucket_removable),
    Rule("bucket-name",
         "Bucket names follow Cloud Storage's naming rules.",
         "https://cloud.google.com/storage/docs/buckets#naming",
         check=storage_rules.bucket_name),
    Rule("foreign-bucket-read-only",
         "On a bucket the stack does not create (a data input), the stack grants only "
         "roles/storage.objectViewer.",
         "https://cloud.google.com/storage/docs/access-control/iam-roles",
         stack_check=storage_rules.foreign_buckets_read_only),
    Rule("gpu-vm-terminate-on-maintenance",
         "VMs with GPUs must stop on host maintenance (onHostMaintenance TERMINATE).",
         "https://cloud.google.com/compute/docs/instances/setting-vm-host-options",
         check=compute_rules.gpu_terminate),
    Rule("bundled-gpu-machine-no-guest-accelerators",
         "Accelerator-optimized machine types (A2, A3, A4, G2, G4) come with their GPUs: declare no "
         "guestAccelerators.",
         "https://cloud.google.com/compute/docs/accelerator-optimized-machines",
         check=compute_rules.bundled_gpu_no_accelerators),
    Rule("spot-scheduling-consistent",
         "Spot VMs: preemptible, no automatic restart, TERMINATE on maintenance, a termination "
         "action; standard VMs: no termination action.",
         "https://cloud.google.com/compute/docs/instances/create-use-spot",
         check=compute_rules.spot_scheduling),
    Rule("gpudirect-nics",
         "A3 High/Mega, A3 Ultra and A4 VMs carry their family's GPU NICs: gVNICs on ordinary VPCs, then "
         "4 (TCPX) or 8 (TCPXO) gVNICs, or 8 MRDMA NICs (RDMA), each on its own network.",
         "https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth",
         check=gpudirect_rules.gpudirect_nics),
    Rule("hyperdisk-only-families",
         "A3 Ultra and A4 VMs boot from Hyperdisk (hyperdisk-balanced).",
         "https://cloud.google.com/compute/docs/accelerator-optimized-machines",
         check=gpudirect_rules.hyperdisk_boot),
    Rule("compact-placement-limits",
         "A compact placement policy holds at most 150 VMs, of the families it supports, all set to "
         "TERMINATE on host maintenance.",
         "https://cloud.google.com/compute/docs/instances/define-instance-placement",
         stack_check=gpudirect_rules.compact_placement_limits),
    Rule("spot-no-reservation",
         "Spot VMs and spot GKE node pools declare no reservation affinity other than NO_RESERVATION: "
         "Compute Engine cannot consume a reservation to create Spot VMs or preemptible instances.",
         "https://cloud.google.com/compute/docs/instances/reservations-consume#limitations",
         check=compute_rules.spot_no_reservation),
    Rule("flex-start-time-limited",
         "Flex-start VMs: a max run duration of at most 7 days, a termination action, no automatic "
         "restart, a machine family that offers flex-start; flex-start GKE node pools: not spot, at "
         "most 7 days.",
         "https://cloud.google.com/compute/docs/instances/about-flex-start-vms",
         check=compute_rules.flex_start),
    Rule("provisioning-model-offered",
         "VMs use a provisioning model their machine series is offered with (A3 Ultra and A4: "
         "RESERVATION_BOUND, FLEX_START or SPOT, not on demand); a RESERVATION_BOUND VM names its reservation.",
         "https://cloud.google.com/ai-hypercomputer/docs/consumption-models",
         check=consumption_rules.provisioning_model_offered),
    Rule("flex-start-no-reservation",
         "Flex-start VMs declare reservation affinity NO_RESERVATION, as Google's Cluster Toolkit sends them "
         "(schedmd-slurm-gcp-v6-controller/partition.tf) and refuses reservations with them.",
         "https://cloud.google.com/compute/docs/instances/about-flex-start-vms",
         check=consumption_rules.flex_start_no_reservation),
    Rule("firewall-no-public-ssh",
         "No ingress firewall rule opens SSH (tcp:22 or all ports) to 0.0.0.0/0 or ::/0.",
         "https://cloud.google.com/compute/docs/connect/ssh-best-practices/network-access",
         check=compute_rules.firewall_no_public_ssh),
    Rule("ssh-keys-need-oslogin-off",
         "VMs and TPU VMs that take keys from ssh-keys metadata set enable-oslogin FALSE.",
         "https://cloud.google.com/compute/docs/oslogin/set-up-oslogin",
         check=compute_rules.oslogin_off_with_ssh_keys),
    Rule("labels-valid",
         "Labels follow GCP's label rules (keys and values, at most 64 labels).",
         "https://cloud.google.com/compute/docs/labeling-resources#requirements",
         check=label_rules.labels_valid),
    Rule("function-v2-run-invoker",
         "2nd-gen Cloud Functions are invoked with roles/run.invoker on their Cloud Run service, "
         "not roles/cloudfunctions.invoker.",
         "https://cloud.google.com/functions/docs/securing/authenticating",
         check=service_rules.function_invoker_role),
    Rule("artifact-registry-repository-id",
         "Artifact Registry repository ids follow its naming rules.",
         "https://cloud.google.com/artifact-registry/docs/repositories/create-repos",
         check=service_rules.registry_repository_id),
    Rule("artifact-registry-not-public",
         "No image repository is readable by allUsers or allAuthenticatedUsers.",
         "https://cloud.google.com/artifact-registry/docs/access-control",
         check=service_rules.registry_not_public),
    Rule("vm-changes-scoped",
         "A custom role that changes VMs (setLabels) is granted on the project only under an IAM "
         "condition naming those VMs by resource.name, and holds no delete, metadata or actAs right.",
         "https://cloud.google.com/iam/docs/conditions-resource-attributes",
         stack_check=iam_rules.vm_changes_scoped),
    Rule("api-service-not-disabled-on-destroy",
         "APIs enabled by a stack stay enabled when it is destroyed (disableOnDestroy false).",
         "https://cloud.google.com/service-usage/docs/enable-disable",
         check=service_rules.service_not_disabled_on_destroy),
)

RULES_BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}


def check_resources(resources: Sequence[Resource], rules: Sequence[Rule] = RULES) -> list[Violation]:
    """Every violation of every rule over one stack's declared resources."""
    out: list[Violation] = []
    for rule in rules:
        out += rule.run(resources)
    return out
