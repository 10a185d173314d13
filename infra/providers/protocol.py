"""The realizer protocol, documented once: what every provider's module implements and promises.

A provider is a module (infra/providers/<name>/realizer.py) exposing the functions of `Realizer`
below, with exactly these signatures (tests/unit/providers/test_realizer_registry.py checks it).
Callers get the module from the registry (infra/providers/realizers.py) and ask its
`capabilities(spec)` wherever providers differ; they never name a provider. Typed in, typed out,
as SkyPilot's sky/provision interface is: a ClusterSpec in, an Inventory out.

Every function's contract:

  plan(spec)          What `up` would create, as typed rows, without touching anything (no root,
                      no credentials, no network). Refuses (ConfigError) what `up` would refuse.
  estimate(spec)      The hourly list-price estimate of the stack (infra/spec/cost.py).
  capabilities(spec)  What the stack can do and needs (Capabilities): the same answer before the
                      stack exists and after; no effect on anything.
  up(spec, progress)  Create the stack, or bring an existing one to the spec; idempotent. Records
                      the provider (stack_home.record_provider) and its intent before creating
                      anything, so `down` finds whatever a crash left. Returns the Inventory.
  down(stack, force, progress)
                      Remove everything the stack has; idempotent; True if anything was there.
                      `force`: also without (or with unreadable) state, by names and labels.
  inventory(stack)    The realized stack as the layers above use it (nodes, pinned host keys,
                      bucket). ConfigError naming the stack when it is not up.
  spec(stack)         The ClusterSpec the live stack was realized from (ephemeral stacks have no
                      stack file).
  info(stack)         A live stack's row for `trainctl ls`; `broken` where its state is unreadable.
  reap(project, dry_run, progress)
                      Remove what outlived its TTL within the provider's reach (this machine, a
                      project); returns what was (or, dry run, would be) removed.
  repair(stack, nodes, progress)
                      Bring the named nodes back (recreated where they are gone) and return the
                      inventory that has them; `capabilities(spec).repair_keeps_addresses` says
                      whether they come back at their old addresses. CapacityUnavailable while the
                      provider has none (the caller waits and asks again).
  instance_status(stack, nodes)
                      RUNNING, TERMINATED (stopped) or None (gone) per node, as the provider says.
  preempt(stack, node, grace, progress, action, unavailable_for)
                      Reclaim a spot node as the provider would, where something can ask it to;
                      ConfigError (`unsupported`) where nothing can.

Errors: ConfigError (exit 2) for input the user can fix, before anything is created;
ProvisionError (exit 3) when creating or removing failed; CapacityUnavailable when the provider
has no capacity right now (infra/errors.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Protocol

if TYPE_CHECKING:  # the models load pydantic: `trainctl ls` with nothing up never needs them
    from infra.providers.inventory import Inventory
    from infra.spec.cluster import ClusterSpec
    from infra.spec.cost import Estimate

Progress = Callable[[str], None]


CAPACITY = "capacity"


@dataclass(frozen=True)
class PlanRow:
    """One resource `up` would create: its kind ("netns", "compute/instance", ...), its name,
    and what else the provider tells about it, in the order the provider gives it. Rows of kind
    CAPACITY are no resource but a pool's capacity: `nodes`, `provisioning` (on-demand, spot,
    reservation ...) and `quota` ([{metric, region, needed, free}], free None where not read;
    `quota_free` then says why)."""

    kind: str
    name: str = ""
    values: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_capacity(self) -> bool:
        return self.kind == CAPACITY

    @property
    def kept_on_down(self) -> bool:
        """A resource `down` leaves in place (a named stack's bucket, with its checkpoints)."""
        return self.values.get("on_down") == "kept"


@dataclass(frozen=True)
class Capabilities:
    """What a stack of a provider can do and needs, asked by callers instead of the provider's
    name (as SkyPilot's CloudImplementationFeatures are). Known from the spec alone, before the
    stack exists. What a realized stack turned out to be (nodes that install offline, a registry
    made for the stack alone) is the Inventory's: nodes behind a private endpoint without a
    route off it install offline, others do not, and the inventory records which."""

    # How jobs reach the cluster: commands over SSH to its nodes, or Jobs through Kubernetes.
    target: Literal["ssh", "gke"]
    # Whether code and environment go onto the nodes (`bootstrap`) before a launch; a Kubernetes
    # Job runs an image that already holds them.
    needs_bootstrap: bool
    # Whether `repair` brings nodes back at the addresses they had (what the others were told).
    repair_keeps_addresses: bool
    # Whether the nodes reach Google's APIs and registries (Artifact Registry).
    reaches_google: bool
    # Whether nodes are machines of a named type with a boot disk (GCP), or this machine's
    # namespaces (local).
    machine_types: bool
    # Whether pods run stand-ins for images instead of pulling them (the stack's private endpoints
    # say its machines pull none): an experiment's code is then stood in for, never built.
    stands_in_images: bool = False
    # Why the provider bills nothing for the nodes (None: it bills them at its prices): the local
    # stack's namespaces, a simulated project's machines on this host.
    unbilled: str | None = None
    # How a run's shared_dir reaches every node: "host", a folder of this machine (the local
    # stack's namespaces share its tree); "bucket", the run's bucket folder mounted with Cloud
    # Storage FUSE; None: neither can (GKE pods; machines with no route to Google's storage).
    shared_folder: Literal["host", "bucket"] | None = None
    # The frameworks (trainctl/launchers/spec.py `Framework`) jobs of this target cannot run yet,
    # each with why: a run naming one is refused before anything is created.
    refused_frameworks: Mapping[str, str] = field(default_factory=dict)
    # What runs a detached run's controller on this target (infra/providers/controllers.py), in
    # words; None: there is none yet, and `run --detach` is refused before anything is made.
    controller: str | None = None


@dataclass(frozen=True)
class StackInfo:
    """A live stack as `trainctl ls` and the reaper see it."""

    stack: str
    provider: str
    nodes: int
    age_h: float
    ttl_left_h: float
    cost_so_far: float
    broken: bool = False  # its state could not be read: `down --force` is the way out
    idle_h: float | None = None  # how long it has sat unused and idle, where its idle_minutes are watched


class Realizer(Protocol):
    def plan(self, spec: ClusterSpec) -> list[PlanRow]: ...

    def estimate(self, spec: ClusterSpec) -> Estimate: ...

    def capabilities(self, spec: ClusterSpec) -> Capabilities: ...

    def up(self, spec: ClusterSpec, progress: Progress) -> Inventory: ...

    def down(self, stack: str, *, force: bool, progress: Progress) -> bool: ...

    def inventory(self, stack: str) -> Inventory: ...

    def spec(self, stack: str) -> ClusterSpec: ...

    def info(self, stack: str) -> StackInfo: ...

    def reap(self, *, project: str | None, dry_run: bool, progress: Progress) -> list[str]: ...

    def repair(self, stack: str, nodes: list[str], progress: Progress) -> Inventory: ...

    def instance_status(self, stack: str, nodes: list[str]) -> dict[str, str | None]: ...

    def preempt(self, stack: str, node: str, *, grace: float, progress: Progress,
                action: str | None = None, unavailable_for: float = 0.0) -> str: ...
