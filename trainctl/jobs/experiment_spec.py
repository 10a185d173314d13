"""The experiment file: one YAML that says what to run, where, and what to keep."""

from __future__ import annotations

import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from infra.spec.budget import Budget
from bootstrap.data_inputs import DataInput, overlapping
from infra.spec.cluster import Role, validate_name
from infra.spec.stack_config import ConfigError, format_validation_error
from trainctl.launchers import DEFAULT_JOB_RETRIES, DEFAULT_MAX_RESTARTS
from trainctl.launchers.shared_dir import SharedDir
from infra.spec.gke_names import kube_name
from trainctl.launchers.spec import Framework

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Model(BaseModel):
    # Fields are described by the docstrings under them, as infra.spec.model.SpecModel's are.
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunSection(Model):
    framework: Framework = "torch"
    """`torch` runs `command` under torchrun; `tensorflow` runs it on every node with TF_CONFIG;
    `jax` runs it on every node, `jax.distributed.initialize()` told its coordinator, process
    count and process id by trainctl."""
    command: tuple[str, ...] = Field(min_length=1)
    """The program and its arguments, relative to the code folder; a string is split as a shell
    would, but never run by one."""
    processes_per_node: int | None = Field(None, ge=1, le=64)
    """Training processes per node; default: the stack's."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the program (they may override trainctl's own)."""
    commands: dict[Role, tuple[str, ...]] = Field(default_factory=dict)
    """A worker pool's own program (e.g. an evaluator that evaluates checkpoints as they appear);
    pools not named here run `command`."""
    legacy_keras: bool = False
    """TensorFlow only: Keras 2 as tf.keras, for `model.fit` under a distribution strategy, which
    Keras 3 (TensorFlow 2.16 and later) fails (keras-team/keras#20585): tf_keras added to the
    nodes' requirements at the TensorFlow minor they pin, TF_USE_LEGACY_KERAS=1 in the job's env."""

    @field_validator("command", mode="before")
    @classmethod
    def split_string(cls, v: Any) -> Any:
        # A string is split like a shell would, but never run by one: its words reach torchrun
        # as separate, quoted arguments.
        return tuple(shlex.split(v)) if isinstance(v, str) else v

    @field_validator("commands", mode="before")
    @classmethod
    def split_strings(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {role: tuple(shlex.split(c)) if isinstance(c, str) else c for role, c in v.items()}
        return v

    @field_validator("env")
    @classmethod
    def env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if not ENV_NAME.match(key):
                raise ValueError(f"environment variable name {key!r} is not valid")
        return v

    @model_validator(mode="after")
    def legacy_keras_is_tensorflow(self) -> RunSection:
        if self.legacy_keras and self.framework != "tensorflow":
            raise ValueError(f"legacy_keras sets up tf_keras for TensorFlow's tf.keras; framework "
                             f"{self.framework} has no Keras to replace (leave legacy_keras out, or use "
                             "framework: tensorflow)")
        return self


class RestartSection(Model):
    """Modelled on AI Platform: workers restart first, then the whole job reruns; both resume
    from the latest complete checkpoint. Permanent errors fail at once."""

    max_restarts: int = Field(DEFAULT_MAX_RESTARTS, ge=0, le=100)
    """torchrun restarts of the worker group."""
    job_retries: int = Field(DEFAULT_JOB_RETRIES, ge=0, le=20)
    """Reruns of the whole job by trainctl, from the latest checkpoint."""
    permanent_exit_codes: tuple[int, ...] = (2,)  # e.g. argparse errors, ImportError wrappers
    """Exit codes that fail the job at once, without a restart or rerun."""
    max_recoveries: int | None = Field(None, ge=0, le=1000)
    """Recoveries from preemption (spot nodes recreated, job resumed): not counted as job
    reruns, which are for the program's own failures. Unset: as many as the TTL allows."""


class Parameter(Model):
    """One hyperparameter, as AI Platform's HyperparameterSpec describes it."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,40}$")
    """The parameter's name, passed to the program as `--<name>=<value>`."""
    type: Literal["DOUBLE", "INTEGER", "CATEGORICAL"]
    """How values are drawn: a real number, an integer, or one of `values`."""
    min: float | None = None
    """The lowest value (DOUBLE, INTEGER)."""
    max: float | None = None
    """The highest value (DOUBLE, INTEGER)."""
    scale: Literal["LINEAR", "LOG"] = "LINEAR"
    """How values between min and max are spread; LOG needs min > 0."""
    values: tuple[str | int | float, ...] = ()
    """The choices of a CATEGORICAL parameter."""

    @model_validator(mode="after")
    def bounds(self) -> Parameter:
        if self.type == "CATEGORICAL":
            if not self.values:
                raise ValueError(f"parameter {self.name}: CATEGORICAL needs values")
        else:
            if self.min is None or self.max is None or self.min >= self.max:
                raise ValueError(f"parameter {self.name}: needs min < max (got {self.min}, {self.max})")
            if self.scale == "LOG" and self.min <= 0:
                raise ValueError(f"parameter {self.name}: LOG scale needs min > 0 (got {self.min})")
        return self


class ContainerSection(Model):
    """Run in a container image instead of the node's uv environment: built by trainctl from
    the code and requirements (a base from Debian's packages) or already built (`trainctl
    build`: localhost/trainctl/<name>:<tag>), pushed to the stack's registry; or an image in
    Artifact Registry, which GCP nodes pull as it is."""

    image: str | None = None
    """An image trainctl built (`localhost/trainctl/<name>:<tag>`) or one in Artifact Registry
    (`<region>-docker.pkg.dev/...`); unset: built from the code and requirements."""

    @field_validator("image")
    @classmethod
    def obtainable(cls, v: str | None) -> str | None:
        if v is not None and not (v.startswith("localhost/trainctl/") or in_artifact_registry(v)):
            raise ValueError(f"image {v!r} cannot be had: trainctl runs images it built "
                             "(localhost/trainctl/<name>:<tag>, see `trainctl build`), pushed to the "
                             "stack's own registry, or images in Artifact Registry "
                             "(<region>-docker.pkg.dev/...) on GCP stacks; leave image out to build "
                             "one from code and requirements")
        return v


def in_artifact_registry(image: str) -> bool:
    return image.split("/", 1)[0].endswith("-docker.pkg.dev")


class NetworkCheckSection(Model):
    """The network pre-flight (trainctl/jobs/network_check.py): an all-reduce across all nodes
    before training, held to `min_fraction` of the bus bandwidth the catalog expects."""

    below: Literal["refuse", "warn"] = "refuse"
    """What a bandwidth below `min_fraction` does: refuse to train, or warn and go on."""
    min_fraction: float = Field(0.5, gt=0, le=1)
    """The fraction of the catalog's expected bus bandwidth the all-reduce must reach."""
    size_mb: int = Field(32, ge=1, le=4096)
    """The all-reduce's message size, in MB."""
    iterations: int = Field(5, ge=1, le=100)
    """Timed all-reduce iterations."""


class SweepSection(Model):
    metric: str = "test_accuracy"
    """The metric trials are compared by, as the program reports it (metrics.json or hypertune)."""
    goal: Literal["MAXIMIZE", "MINIMIZE"] = "MAXIMIZE"
    """Whether a higher or a lower `metric` is better."""
    max_trials: int = Field(6, ge=1, le=1000)
    """How many trials the sweep runs in all."""
    max_parallel_trials: int = Field(1, ge=1, le=64)
    """How many trials run at once."""
    algorithm: Literal["tpe", "random"] = "tpe"
    """How the next trial's parameters are chosen: Optuna's TPE sampler, or at random."""
    parallel_mode: Literal["split", "sequential"] = "split"
    """Parallel trials split the cluster's nodes between them; `sequential` gives each trial all."""
    pruner: Literal["median", "none"] = "none"
    """`median` stops a trial whose intermediate metric falls below the median of earlier trials'."""
    parameters: tuple[Parameter, ...] = Field(min_length=1)
    """The hyperparameters to search (see `sweep.parameters[].*`)."""


# An artifact the program leaves in its working directory on the chief (a snapshot.pt saved next
# to the script, as PyTorch's DDP tutorial does) rather than in the job dir: `workdir:<path>`.
WORKDIR = "workdir:"


def from_workdir(artifact: str) -> str | None:
    """The path inside the chief's working directory, for a `workdir:` artifact; else None."""
    return artifact[len(WORKDIR):] if artifact.startswith(WORKDIR) else None


def safe_relative(value: str, what: str, inside: str = "the job dir") -> str:
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts or not value.strip():
        raise ValueError(f"{what} {value!r} must be a relative path inside {inside} "
                         "(no leading '/', no '..')")
    return str(path)


class Experiment(Model):
    """The experiment file: what to run, on which stack, and what to keep."""

    name: str
    """The experiment's name (at most 30 characters: a run suffix makes the stack's name)."""
    stack: str = "local"
    """The stack to run on: a name in stacks/ or a stack file's path."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Stack-file fields (`trainctl:` keys without the prefix) to override for this experiment."""
    code: str = "."
    """The folder synced to every node, relative to the experiment file."""
    excludes: tuple[str, ...] = ()
    """rsync patterns left out of the sync."""
    requirements: str | None = None
    """A requirements file inside `code` that bootstrap installs with uv."""
    setup: tuple[str, ...] = ()
    """Shell commands run once on every node after the environment is built."""
    run: RunSection
    """What runs (see `run.*`)."""
    restart: RestartSection = Field(default_factory=RestartSection)
    """Restarts and reruns (see `restart.*`)."""
    ttl_hours: float = Field(2.0, gt=0, le=24 * 7)
    """The run's stack lives at most this long."""
    artifacts: tuple[str, ...] = ("metrics.json", "model/")
    """Paths in the job dir (or `workdir:<path>` in the chief's working directory) copied to
    runs/<run-id>/."""
    sweep: SweepSection | None = None
    """A hyperparameter sweep instead of one run (see `sweep.*`)."""
    container: ContainerSection | None = None
    """Run in a container image instead of the node's uv environment (see `container.*`)."""
    budget: Budget | None = None
    """A budget over the stack file's (infra/spec/budget.py)."""
    data: tuple[DataInput, ...] = ()
    """gs:// prefixes copied to (or mounted on) every node before training (see `data[].*`)."""
    network_check: NetworkCheckSection | None = None
    """The network pre-flight before training; off unless named (see `network_check.*`)."""
    queue: str | None = None
    """GKE: the Kueue LocalQueue that admits the run's job (a JobSet labelled
    `kueue.x-k8s.io/queue-name`); overrides the stack's `queue`. `trainctl run` refuses it for
    now: the cluster it stands up has no Kueue (docs/how-to/kueue-and-jobset.md)."""
    priority_class: str | None = None
    """GKE: the PriorityClass of the run's pods; overrides the stack's `priority_class`."""
    shared_dir: SharedDir | None = None
    """One folder for the run that every node reads and writes: a host folder on the local stack,
    the run's `gs://<bucket>/<run-id>/shared` mounted with Cloud Storage FUSE on GCP VMs and TPU
    VMs; in TRAINCTL_SHARED_DIR and `{shared_dir}`, with `links` from the working directory
    (see `shared_dir.*`). Unset: none."""

    # Where the file was read from; code paths are relative to it.
    base_dir: Path = Field(default=Path("."), exclude=True)
    # Where the overrides were written, for errors the stack's validation finds in them.
    _overrides_from: str = PrivateAttr("overrides")
    # Where the budget was written (the file, or --budget), for a refusal to name it.
    _budget_from: str = PrivateAttr("the experiment's budget")

    @field_validator("queue", "priority_class")
    @classmethod
    def kubernetes_name(cls, v: str | None, info: ValidationInfo) -> str | None:
        return kube_name(v, str(info.field_name))

    @field_validator("name")
    @classmethod
    def short_name(cls, v: str) -> str:
        validate_name(v, "experiment name")
        if len(v) > 30:
            raise ValueError(f"experiment name {v!r} is longer than 30 characters "
                             "(a run suffix is appended to make the stack name)")
        return v

    @field_validator("requirements")
    @classmethod
    def requirements_inside_code(cls, v: str | None) -> str | None:
        return None if v is None else safe_relative(v, "requirements", "the code folder")

    @field_validator("artifacts")
    @classmethod
    def artifact_paths(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        checked: dict[str, str] = {}  # where it lands in runs/<run-id>/ -> the artifact
        for artifact in v:
            path = from_workdir(artifact)
            inside = "the chief's working directory" if path is not None else "the job dir"
            name = safe_relative(artifact if path is None else path, "artifact", inside)
            if name in checked:
                raise ValueError(f"artifacts {checked[name]!r} and {artifact!r} would both be collected "
                                 f"to runs/<run-id>/{name}")
            checked[name] = artifact
        return tuple(("" if from_workdir(a) is None else WORKDIR) + name + ("/" if a.endswith("/") else "")
                     for name, a in checked.items())

    @field_validator("data")
    @classmethod
    def separate_folders(cls, v: tuple[DataInput, ...]) -> tuple[DataInput, ...]:
        problem = overlapping(v)
        if problem:
            raise ValueError(problem)
        return v

    @property
    def code_dir(self) -> Path:
        return (self.base_dir / self.code).resolve()

    @property
    def overrides_from(self) -> str:
        return self._overrides_from

    @property
    def budget_from(self) -> str:
        return self._budget_from

    def with_budget(self, budget: Budget, given_as: str) -> Experiment:
        changed = self.model_copy(update={"budget": budget})
        changed._overrides_from, changed._budget_from = self._overrides_from, given_as
        return changed


def build_experiment(data: dict[str, Any], path: Path) -> Experiment:
    if "base_dir" in data:
        raise ConfigError(f"{path}: unknown key 'base_dir'")
    try:
        exp = Experiment.model_validate({**data, "base_dir": path.resolve().parent})
    except ValidationError as exc:
        raise ConfigError(format_validation_error(str(path), exc, Experiment)) from None
    if not exp.code_dir.is_dir():
        raise ConfigError(f"{path}: code: {exp.code_dir} is not a directory")
    if exp.container and exp.setup:
        raise ConfigError(f"{path}: setup commands prepare the node's uv environment; with container, "
                          "build what they do into the image (its requirements) instead")
    if exp.network_check and (exp.run.framework != "torch" or exp.container):
        raise ConfigError(f"{path}: network_check runs its all-reduce with torch in the nodes' uv environment; "
                          "it needs run.framework torch and no container")
    if exp.run.legacy_keras and exp.container and exp.container.image:
        raise ConfigError(f"{path}: run.legacy_keras installs tf_keras into the environment trainctl builds; "
                          f"container.image {exp.container.image} is built already: install tf_keras in it and "
                          "set TF_USE_LEGACY_KERAS=1 in run.env instead")
    refuse_unusable_shared_dir(exp, path)
    if exp.requirements and not (exp.code_dir / exp.requirements).is_file():
        raise ConfigError(f"{path}: requirements: {exp.code_dir / exp.requirements} does not exist")
    if exp.sweep and exp.sweep.parallel_mode == "split":
        nodes = exp.overrides.get("nodes")
        if isinstance(nodes, int) and nodes % exp.sweep.max_parallel_trials:
            raise ConfigError(f"{path}: sweep.max_parallel_trials {exp.sweep.max_parallel_trials} must "
                              f"divide the node count {nodes} (parallel_mode split)")
    return exp


def refuse_unusable_shared_dir(exp: Experiment, path: Path) -> None:
    commands = [exp.run.command, *exp.run.commands.values()]
    if exp.shared_dir is None and any("{shared_dir}" in arg for command in commands for arg in command):
        raise ConfigError(f"{path}: run.command names {{shared_dir}}, but the experiment has no shared_dir "
                          "(add `shared_dir: {}` for one folder of the run on every node)")
    if exp.shared_dir is not None and exp.container is not None:
        raise ConfigError(f"{path}: shared_dir is made on the nodes, outside a container's file system; "
                          "with container, write checkpoints to the job dir ({job_dir}) through fsspec/gcsfs")
