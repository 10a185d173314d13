"""The GCP realizer: `pulumi up`/`destroy` on this project through the Automation API, then the
nodes' host keys from their guest attributes, written into the same Inventory the local stack uses.

What depends on the kind of nodes (VMs, a TPU slice, a GKE node pool) is asked of the stack's
NodeKind (node_kinds.py); what the program is handed, of pulumi_workspace.py.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from namespace_nodes import keys
from infra.spec.cost import Estimate, estimate as estimate_cost
from infra.providers.gcp import gke_cluster_objects, idle_status, preemption, private_endpoints, queued_tpu
from infra.providers.gcp.adoption import bucket_to_adopt
from infra.providers.gcp.node_kinds import node_kind
from infra.providers.gcp.prerequisites import check_google_credentials, check_prerequisites
from infra.providers.gcp.program.storage import ADOPT_ENV
from infra.providers.gcp.pulumi_workspace import (current_meta, destroy_env, destroy_output, program_env, pulumi_stack,
                                                  read_meta, record_landed_spec, write_meta)
from infra.providers.gcp.zone_failover import (place, record_placement, refusal_of, regions_with_quota,
                                               stay_where_landed, ZoneAttempt)
from infra.providers.inventory import Inventory, Node, Registry
from infra.providers.protocol import Capabilities, PlanRow, Progress, StackInfo
from infra.providers.realizers import unsupported
from infra.providers.host_keys import wait_for_host_keys
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import REPO_ROOT, ConfigError, load_stack
from infra.providers.stack_home import kill_clients, mark_deleting, record_provider, stack_lock, state_dir

POLICY_PACK_DIR = "policy"


def policy_packs() -> list[str]:
    """GCP's documented constraints, enforced by the engine on every `up` (the repo's pack)."""
    pack = REPO_ROOT / POLICY_PACK_DIR
    return [str(pack)] if (pack / "PulumiPolicy.yaml").is_file() else []


def plan(spec: ClusterSpec) -> list[PlanRow]:
    """Resources `up` would create: the Pulumi program itself, evaluated under mocks, refused
    (exit 2) when it breaks a rule of the policy pack `up` enforces or names a reservation that
    cannot hold its VMs, or quota the project has not free (read from Compute: the parts of a plan
    that ask the project). Each pool's capacity rows (capacity.py) follow the resources."""
    from infra.providers.gcp import capacity, reservations
    from infra.providers.gcp.program.mocks import evaluate
    from infra.providers.gcp.program.storage import kept_on_down

    declared = evaluate(spec).resources
    _refuse_policy_violations(spec, declared)
    reservations.check(spec)
    pools = capacity.plan_rows(spec)
    rows = []
    for r in declared:
        kind = r.type.removeprefix("gcp:").split(":")[0] if r.type.startswith("gcp:") else r.type
        values = _summary(r.inputs)
        if kind == "storage/bucket":
            values["on_down"] = "kept" if kept_on_down(spec) else "deleted with its objects"
        rows.append(PlanRow(kind, str(r.inputs.get("name", r.name)), values))
    rows += queued_tpu.plan_rows(spec) + gke_cluster_objects.plan_rows(spec)
    # Pulumi registers resources from its own threads, in no fixed order: a plan is compared
    # between runs (CI logs, `plan --json`), so it is listed by kind and name, node-1 before node-10.
    return sorted(rows, key=lambda row: (row.kind, _natural(row.name))) + pools


def capabilities(spec: ClusterSpec) -> Capabilities:
    """VMs and TPU VMs run jobs over SSH after bootstrap; a GKE cluster runs them as Kubernetes
    Jobs of images."""
    return node_kind(spec).capabilities()


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _refuse_policy_violations(spec: ClusterSpec, declared: list[Any]) -> None:
    from policy.declared import Resource
    from policy.rules import check_resources

    violations = check_resources([Resource(r.type, r.name, r.inputs, getattr(r, "options", None) or {})
                                  for r in declared])
    if violations:
        lines = "\n".join(f"  - {v}" for v in violations)
        raise ConfigError(f"stack {spec.name!r} violates {len(violations)} GCP policy rule(s):\n{lines}")


def _summary(inputs: dict[str, Any]) -> dict[str, Any]:
    keys_ = ("machineType", "acceleratorType", "runtimeVersion", "zone", "location", "sourceRanges",
             "nodeCount", "ipCidrRange", "bucket", "permissions", "role")
    role = (inputs.get("labels") or {}).get("trainctl-role")
    out = {**({"pool": role} if role else {}), **{k: inputs[k] for k in keys_ if k in inputs}}
    affinity = inputs.get("reservationAffinity") or (inputs.get("nodeConfig") or {}).get("reservationAffinity")
    if affinity:  # the name, or `any` / `none`
        named = (affinity.get("specificReservation") or affinity).get("values") or []
        from infra.providers.gcp.program.compute import CONSUME_TYPES  # pulumi_gcp: loaded by plan already

        keyword = {v: k for k, v in CONSUME_TYPES.items()}
        out["reservation"] = named[0] if named else keyword[affinity.get("type") or affinity["consumeReservationType"]]
    return out


def estimate(spec: ClusterSpec) -> Estimate:
    return estimate_cost(spec)


def up(spec: ClusterSpec, progress: Progress) -> Inventory:
    from infra.providers.gcp import reservations
    from infra.providers.gcp.flex_start import FlexStartNotGranted
    from infra.providers.gcp.quota import preflight

    check_prerequisites(spec)
    spec = stay_where_landed(spec, read_meta(spec.name))
    # before anything billable exists; candidate regions without quota are not tried
    spec, skipped = regions_with_quota(spec, lambda placed: preflight(placed, progress), progress)
    reservations.check(spec, progress)
    try:
        return _up(spec, progress, skipped)
    except FlexStartNotGranted:  # what waited in vain went (flex_start.py): everything made for it goes
        progress(f"flex-start: no grant within trainctl's {spec.flex_start_deadline_minutes:g}m wait; "
                 "removing what the stack made")
        down(spec.name, progress=progress)
        raise


def _up(spec: ClusterSpec, progress: Progress, skipped: list[ZoneAttempt]) -> Inventory:
    from infra.providers.gcp.flex_start import await_grant

    sdir = state_dir(spec.name)
    with stack_lock(spec.name, "up"):
        record_provider(spec.name, "gcp")
        private_endpoints.record(spec.name)
        client_key = sdir / "keys" / "id_ed25519"
        public = (keys.read_public_key(client_key) if client_key.exists()
                  else keys.write_ed25519_keypair(client_key, f"trainctl@{spec.name}"))
        meta = current_meta(spec)

        def attempt(placed: ClusterSpec) -> Any:
            """The whole program with the zone of this attempt, as `pulumi up` runs it."""
            from pulumi.automation import CommandError

            workspace_stack = pulumi_stack(placed, program_env(placed, meta["expires_at"], public))
            kept = bucket_to_adopt(placed, workspace_stack)
            if kept:
                progress(f"adopting bucket gs://{kept}, which an earlier `down` kept with its checkpoints")
                workspace_stack.workspace.env_vars[ADOPT_ENV] = kept
            try:
                return await_grant(placed, lambda: workspace_stack.up(on_output=progress, policy_packs=policy_packs()),
                                   progress)
            except CommandError as exc:
                refused = refusal_of(exc)
                if refused is exc:
                    raise
                raise refused from exc

        result, placed, attempts = place(spec, attempt, progress, skipped)
        record_placement(placed, attempts, progress)
        return _write_inventory(placed, {k: v.value for k, v in result.outputs.items()}, client_key, progress,
                                placement=tuple(a.record() for a in attempts))


def _write_inventory(spec: ClusterSpec, outputs: dict[str, Any], client_key: Path | None,
                     progress: Progress, placement: tuple[dict[str, Any], ...] = ()) -> Inventory:
    """The program's `inventory` output completed with pinned host keys, written to the state."""
    sdir = state_dir(spec.name)
    partial = queued_tpu.granted(spec, outputs, progress)["inventory"]
    kubeconfig = gke_cluster_objects.write_kubeconfig(sdir, outputs)
    nodes = partial["nodes"]
    host_keys = fetch_host_keys(spec, nodes, progress)
    (sdir / "keys").mkdir(parents=True, exist_ok=True, mode=0o700)
    inventory = Inventory(
        stack=spec.name, provider="gcp", bucket_uri=partial["bucket_uri"],
        nodes=tuple(Node(**{**n, "host_keys": tuple(host_keys[n["name"]])}) for n in nodes),
        ssh_private_key=str(client_key or ""),  # GKE: pods are reached through Kubernetes
        known_hosts=str(sdir / "keys" / "known_hosts"),
        kubeconfig=str(kubeconfig) if kubeconfig else None,
        gke_service_account=partial.get("gke_service_account"),
        registry=Registry(**partial["registry"]) if partial.get("registry") else None, placement=placement)
    inventory = private_endpoints.adapt(inventory, progress)
    Path(inventory.known_hosts).write_text("\n".join(inventory.known_hosts_lines()) + "\n")
    gke_cluster_objects.apply(spec, kubeconfig, progress)
    inventory.write(sdir / "inventory.json")
    return inventory


def inventory(stack: str) -> Inventory:
    """The stack's inventory; a stack that `pulumi up` made alone is adopted on first use."""
    path = state_dir(stack) / "inventory.json"
    private_endpoints.resume(stack)
    if path.exists():
        return Inventory.read(path)
    return adopt(stack, lambda _line: None)


def adopt(stack: str, progress: Progress) -> Inventory:
    """Take over a stack created by `pulumi up` in the repo: read the program's outputs, pin
    the nodes' host keys from guest attributes, and find the private half of the SSH key the
    program gave the nodes (trainctl:ssh.public_key or ~/.ssh/id_ed25519.pub)."""
    from pulumi.automation import StackNotFoundError

    spec = load_stack(stack)
    check_prerequisites(spec)
    not_up = ConfigError(f"stack {stack!r} is not up: run `trainctl up --stack {stack}` or "
                         f"`pulumi up --stack {stack}`")
    try:
        outputs = {k: v.value for k, v in pulumi_stack(stack, {}, create=False).outputs().items()}
    except StackNotFoundError:
        raise not_up from None
    if "inventory" not in outputs:
        raise not_up
    # before any state is written: a stack trainctl cannot reach is not adopted
    key = _private_key_for(stack, outputs.get("ssh_public_key")) if node_kind(spec).reached_over_ssh else None
    with stack_lock(stack, "adopt"):
        record_provider(stack, "gcp")
        private_endpoints.record(stack)
        write_meta(spec, None, adopted=True)
        progress(f"adopting stack {stack}, created by `pulumi up`")
        return _write_inventory(spec, outputs, key, progress)


def _private_key_for(stack: str, public: str | None) -> Path:
    if not public:
        raise ConfigError(f"stack {stack!r} exports no ssh_public_key (made by an older program): "
                          f"run `pulumi up --stack {stack}` once more, then retry")
    wanted = public.split()[:2]
    candidates = [Path.home() / ".ssh" / name for name in ("id_ed25519", "id_ecdsa", "id_rsa")]
    for private in candidates:
        pub = private.with_name(private.name + ".pub")
        if private.is_file() and pub.is_file() and pub.read_text().split()[:2] == wanted:
            return private
    raise ConfigError(
        f"stack {stack!r} admits the SSH key {wanted[0]} …{wanted[1][-12:]}, whose private half is "
        f"not in {', '.join(str(c) for c in candidates)}: put it there (with its .pub) to use the stack")


def down(stack: str, *, force: bool = False, progress: Progress) -> bool:
    """`pulumi destroy`, keeping stacks/Pulumi.<stack>.yaml. With force, a failed destroy does
    not stop the teardown: whatever still carries the stack's label is deleted through the APIs."""
    private_endpoints.resume(stack)
    check_prerequisites()
    sdir = state_dir(stack)
    with stack_lock(stack, "down") as remove_lock:
        meta = read_meta(stack)
        workspace_stack = _stack_to_destroy(stack, meta, force)
        # neither trainctl's record nor Pulumi's (a second `down`): only what an `up` that
        # stopped before both left (its key) is removed
        removed = sdir.exists() if workspace_stack is None else _destroy(stack, meta, workspace_stack, force, progress)
        shutil.rmtree(sdir, ignore_errors=True)
        remove_lock()
        private_endpoints.release()
        return removed


def _destroy(stack: str, meta: dict[str, Any] | None, workspace_stack: Any, force: bool, progress: Progress) -> bool:
    """What the stack holds, destroyed (the label sweep after it with force); its Pulumi stack removed."""
    outputs = workspace_stack.outputs()
    mark_deleting(stack)
    kill_clients(stack)  # a killed controller's ssh and rsync to the VMs that now go
    try:
        queued_tpu.release(stack, progress)  # not Pulumi's: it goes first, the network it uses after
        gke_cluster_objects.remove(meta, state_dir(stack), progress)  # inside the cluster: before it goes
        workspace_stack.destroy(on_output=destroy_output(progress))  # the stack goes next: no advice
    except Exception as exc:
        if not force:
            raise
        progress(f"pulumi destroy failed ({str(exc).strip().splitlines()[-1:]}); "
                 "deleting what carries the stack's label")
    if force:
        from infra.providers.gcp.leftovers import sweep_labelled

        sweep_labelled(stack, meta, progress)
    if meta and meta.get("spec", {}).get("scheduled_reaper"):
        from infra.providers.gcp.program.scheduled_reaper import left_by_cloud_functions

        progress(left_by_cloud_functions(ClusterSpec.model_validate(meta["spec"])))
    if outputs.get("bucket_kept_on_down") and outputs["bucket_kept_on_down"].value:
        bucket = outputs["bucket"].value
        progress(f"bucket {bucket} is kept (a named stack's checkpoints outlive it); "
                 f"delete it with `gcloud storage rm -r {bucket}`")
    # preserve_config: `pulumi stack rm` otherwise deletes stacks/Pulumi.<stack>.yaml, a
    # tracked file the user wrote (ephemeral stacks have none, so nothing is left behind).
    workspace_stack.workspace.remove_stack(stack, force=force, preserve_config=True)
    return True


def _stack_to_destroy(stack: str, meta: dict[str, Any] | None, force: bool) -> Any:
    """The Pulumi stack `down` destroys; None where neither the backend nor trainctl has one. Made
    where missing if recorded (an `up` stopped early) or forced (the label sweep needs none)."""
    from pulumi.automation import StackNotFoundError

    try:
        return pulumi_stack(stack, destroy_env(meta), create=force or meta is not None)
    except StackNotFoundError:
        return None


def spec(stack: str) -> ClusterSpec:
    meta = read_meta(stack)
    return ClusterSpec.model_validate(meta["spec"]) if meta else load_stack(stack)


def info(stack: str) -> StackInfo:
    try:
        meta = read_meta(stack)
        if meta is None:
            raise ValueError("no gcp.json")
        spec = ClusterSpec.model_validate(meta["spec"])
        created = meta.get("created_at") or meta["expires_at"] - spec.ttl_hours * 3600
    except (KeyError, TypeError, ValueError, ConfigError):
        return StackInfo(stack, "gcp", 0, 0.0, 0.0, 0.0, broken=True)
    age_h = (time.time() - created) / 3600
    return StackInfo(stack, "gcp", spec.node_count, age_h, spec.ttl_hours - age_h,
                     estimate(spec).per_hour * age_h, idle_h=idle_status.idle_hours(spec))


def reap(*, project: str | None, dry_run: bool, progress: Progress) -> list[str]:
    """trainctl's resources in `project` whose expiry label has passed (no project: nothing)."""
    if project is None:
        return []
    from infra.providers.gcp.reaper import delete, find_expired

    check_google_credentials()  # the reaper talks to Google's APIs only, never to Pulumi
    expired = find_expired(project, report=progress)
    for item in expired:
        progress(f"{item.kind} {item.name} (stack {item.stack}) expired {item.expired_for_s}s ago")
    if not dry_run:
        delete(project, expired, progress)
    return [item.name for item in expired]


def preempt(stack: str, node: str, *, grace: float, progress: Progress,
            action: str | None = None, unavailable_for: float = 0.0) -> str:
    """Through the stack's endpoints where they preempt on request; else refused (preemption.py)."""
    return preemption.preempt(stack, spec(stack), node, grace=grace, progress=progress, action=action,
                              unavailable_for=unavailable_for)


def instance_status(stack: str, nodes: list[str]) -> dict[str, str | None]:
    """Compute's view of each node: RUNNING, TERMINATED, ... or None when it no longer exists."""
    private_endpoints.resume(stack)
    return node_kind(spec(stack)).status(nodes)


def repair(stack: str, nodes: list[str], progress: Progress) -> Inventory:
    """Bring reclaimed nodes back: a stopped VM is started on its disk (Compute instances.start),
    a preempted TPU (which cannot restart) is deleted, then `pulumi up --refresh` recreates what
    no longer exists and reads the nodes' addresses again; host keys are pinned anew from guest
    attributes. Refused in its zone for capacity or quota, the whole cluster moves to another of
    the stack's zones (cluster_move.py). Raises CapacityUnavailable while none has capacity (the
    launcher backs off)."""
    from google.api_core.exceptions import GoogleAPIError
    from infra.providers.gcp.cluster_move import google_refusal, repaired_or_moved

    private_endpoints.resume(stack)
    cluster = spec(stack)
    kind = node_kind(cluster)
    kind.check_repairable()
    check_prerequisites(cluster)
    current = inventory(stack)
    with stack_lock(stack, "repair"):
        meta = read_meta(stack) or {}
        # an adopted stack's program reads its own stack file, as at `pulumi up` by hand
        env = {} if meta.get("adopted") else program_env(cluster, meta.get("expires_at"))

        def here() -> Any:
            status = kind.status(nodes)
            try:
                gone = kind.bring_back(status, [n for n in nodes if status[n] != "RUNNING"], progress)
            except GoogleAPIError as exc:
                raise google_refusal(exc) from exc
            progress(f"recreating {', '.join(gone) or 'nothing'}; reading the nodes again (pulumi up --refresh)")
            return _refreshed_up(cluster, env, progress)

        result, placed, placement = repaired_or_moved(
            cluster, bool(meta.get("adopted")), here,
            lambda moved: _refreshed_up(moved, program_env(moved, meta.get("expires_at")), progress),
            current.placement, progress)
        if placed.zone != cluster.zone:
            record_landed_spec(placed)
        return _write_inventory(placed, {k: v.value for k, v in result.outputs.items()},
                                Path(current.ssh_private_key), progress, placement=placement)


def _refreshed_up(cluster: ClusterSpec, env: dict[str, str], progress: Progress) -> Any:
    from pulumi.automation import CommandError

    try:
        return pulumi_stack(cluster, env).up(on_output=progress, policy_packs=policy_packs(), refresh=True)
    except CommandError as exc:
        raise refusal_of(exc) from exc


def fetch_host_keys(spec: ClusterSpec, nodes: list[dict[str, Any]],
                    progress: Callable[[str], None]) -> dict[str, list[str]]:
    """Host keys as the guest agent published them (guest attributes, namespace hostkeys/),
    read through the authenticated API."""
    return wait_for_host_keys([n["name"] for n in nodes], node_kind(spec).host_keys, progress)
