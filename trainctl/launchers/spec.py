"""LaunchSpec: what to run on a realized cluster, the same for every launcher (SSH nodes or a
GKE Job): the command, the framework, the restart policy, the environment, an image."""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bootstrap.data_inputs import DataInput
from infra.spec.cluster import Role
from trainctl.launchers import DEFAULT_JOB_RETRIES, DEFAULT_MAX_RESTARTS
from trainctl.launchers.shared_dir import SharedDir


# The frameworks a job may name, declared once: the experiment file, `launch --framework` and
# every launcher read this. How each one runs on SSH nodes: trainctl/launchers/ssh/commands.py;
# a target that cannot run one says why in its capabilities (Capabilities.refused_frameworks).
Framework = Literal["torch", "tensorflow", "jax"]
FRAMEWORKS: tuple[Framework, ...] = get_args(Framework)


class LaunchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    command: tuple[str, ...] = Field(min_length=1)
    framework: Framework = "torch"
    nproc_per_node: int = Field(1, ge=1, le=64)
    max_restarts: int = Field(DEFAULT_MAX_RESTARTS, ge=0, le=100)
    job_retries: int = Field(DEFAULT_JOB_RETRIES, ge=0, le=20)
    permanent_exit_codes: tuple[int, ...] = (2,)
    env: dict[str, str] = Field(default_factory=dict)
    max_recoveries: int | None = Field(None, ge=0, le=1000)
    # per worker-pool role, a command that replaces `command` on that pool's nodes
    role_commands: dict[Role, tuple[str, ...]] = Field(default_factory=dict)
    # An image by digest holding code and environment; None: the node's synced code and uv env.
    image: str | None = None
    # The experiment's data inputs: GKE pods mount them (SSH nodes had them staged before launch).
    data: tuple[DataInput, ...] = ()
    # GKE: the Kueue LocalQueue that admits the job, and the pods' PriorityClass (None: none).
    queue: str | None = None
    priority_class: str | None = None
    # One folder for the run on every node (trainctl/launchers/shared_dir.py); None: none.
    shared_dir: SharedDir | None = None

    @field_validator("run_id")
    @classmethod
    def safe_id(cls, v: str) -> str:
        return check_run_id(v)


RUN_ID_RE = re.compile(r"^[a-z0-9][-a-z0-9]{0,62}$")


def check_run_id(value: str) -> str:
    """Run ids name folders, bucket prefixes and rendezvous ids: no paths, no shell."""
    if not RUN_ID_RE.match(value):
        raise ValueError(f"run id {value!r} must be 1-63 lowercase letters, digits and '-'")
    return value
