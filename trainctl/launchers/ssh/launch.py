"""Launch: one command per node, as a plan first, then run over pinned SSH with live logs.

torch:       torchrun on every node, c10d rendezvous on rank 0's internal address, rdzv_id = run
             id; the program sees torchrun's standard variables (RANK, LOCAL_RANK, WORLD_SIZE,
             MASTER_ADDR, MASTER_PORT).
tensorflow:  the program on every node with TF_CONFIG as AI Platform sets it (rank 0 is the
             chief, the others workers 0..n-2), so MultiWorkerMirroredStrategy works unchanged.
TPU VMs:     PyTorch/XLA runs the same command on every worker (PJRT_DEVICE=TPU). TensorFlow
             drives a single-host TPU in-process (TPU_NAME=local); on a multi-host slice only
             worker 0 runs the program, and TPUClusterResolver reaches the TF servers that the
             `-pod` runtime starts on every worker by the slice's name (TPU_NAME), as Google's
             TPU pod recipes run it.
Every program also gets the Vertex AI job-dir variables (AIP_MODEL_DIR, ...).
With an image, each node runs the same command line inside it (bootstrap/containers.py), the
environment passed by name, the node's network as is.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as wait_for_futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bootstrap import containers
from bootstrap.plan import node_paths
from bootstrap.remote_stop import stop_marked
from infra.spec import catalog
from bootstrap.ssh import join, open_connection, shell_env
from infra.spec.accelerator import Tpu
from infra.errors import CapacityUnavailable, ConfigError
from infra.providers.inventory import Inventory, Node
from infra.spec.cluster import POOL_ORDER, TORCH_HAS_NO_PS, Role
from infra.providers.stack_home import stack_still_up
from trainctl.launchers.ssh.attempt_stops import AttemptStops
from trainctl.launchers.failures import Failure, classify
from trainctl.launchers import DEFAULT_JOB_RETRIES, DEFAULT_MAX_RESTARTS
from trainctl.launchers.run_logs import RESULT_FILE
from trainctl.launchers.interrupts import raise_if_pending
from trainctl.launchers import torchrun_agents

STOP_GRACE_SECONDS = 5
HEARTBEAT_SECONDS = 3.0
HEARTBEAT_MISSES = 2
# A node whose command was still starting when the stop went out starts anyway: stop it again.
RESTOP_SECONDS = 2.0
# How long torchrun's agents wait in the rendezvous for nodes that join late: a recreated node's
# reclaim, capacity back-off and bootstrap (a GPU driver's install and its reboot among it) can
# outlast torch's default of 600 s. Only a backstop: the launcher stops the waiting agents itself
# when the recreation fails or the run ends (its TTL, an interrupt).
JOINERS_TIMEOUT_SECONDS = 24 * 3600
EXITCODE_RE = re.compile(r"exitcode\s*:\s*(-?\d+)")
# A program's progress as it prints it ("... step 230 ..."), and where a resumed one starts
# ("resumed from ... step 230"): what a recovery redid, for programs that say so.
STEP_RE = re.compile(r"\bstep (\d+)\b")
RESUMED_RE = re.compile(r"\bresumed from\b.*\bstep (\d+)\b")
# Waits between tries to recreate preempted nodes while the provider has no capacity.
CAPACITY_BACKOFF_SECONDS = (5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0)


class LaunchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    command: tuple[str, ...] = Field(min_length=1)
    framework: Literal["torch", "tensorflow"] = "torch"
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


def job_dir(inventory: Inventory, run_id: str) -> str:
    return f"{inventory.bucket_uri.rstrip('/')}/{run_id}"


def job_env(inventory: Inventory, run_id: str) -> dict[str, str]:
    """The job-dir convention of Vertex AI custom training."""
    base = job_dir(inventory, run_id)
    return {"AIP_MODEL_DIR": f"{base}/model", "AIP_CHECKPOINT_DIR": f"{base}/checkpoints",
            "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs"}


def expand(command: tuple[str, ...], inventory: Inventory, run_id: str) -> list[str]:
    values = {"job_dir": job_dir(inventory, run_id), "run_id": run_id}
    return [arg.replace("{job_dir}", values["job_dir"]).replace("{run_id}", run_id) for arg in command]


def torchrun_target(user: list[str]) -> list[str]:
    """The user's command as torchrun's trailing arguments: `python x.py` → `x.py`,
    `python -m pkg` → `--module pkg`, anything else → `--no-python cmd`."""
    if user[0] in ("python", "python3"):
        rest = user[1:]
        return ["--module", *rest[1:]] if rest[:1] == ["-m"] else rest
    return ["--no-python", *user]


def tasks(inventory: Inventory) -> dict[str, tuple[Role, int]]:
    """Every node's task as AI Platform / Vertex AI name it: (chief|worker|ps|evaluator, index
    within its role), in one pass over the nodes in rank order. Inventories without pools: the
    first node is the chief, the rest workers."""
    ordered = sorted(inventory.nodes, key=lambda n: n.rank)
    pooled = any(n.task is not None for n in ordered)
    seen: dict[Role, int] = {}
    out: dict[str, tuple[Role, int]] = {}
    for i, node in enumerate(ordered):
        role: Role = (node.task or "worker") if pooled else ("chief" if i == 0 else "worker")
        out[node.name] = (role, seen.get(role, 0))
        seen[role] = seen.get(role, 0) + 1
    return out


def task_of(inventory: Inventory, node: Node) -> tuple[Role, int]:
    return tasks(inventory)[node.name]


def members(inventory: Inventory, role: str) -> list[Node]:
    """The role's nodes in rank order."""
    of = tasks(inventory)
    return [n for n in sorted(inventory.nodes, key=lambda n: n.rank) if of[n.name][0] == role]


def command_for(spec: LaunchSpec, inventory: Inventory, node: Node) -> tuple[str, ...]:
    return spec.role_commands.get(task_of(inventory, node)[0], spec.command)


def torch_group(inventory: Inventory) -> list[Node]:
    """The nodes torchrun joins: the chief and the workers (Vertex's pools 0 and 1)."""
    return members(inventory, "chief") + members(inventory, "worker")


def program_tool(node: Node, spec: LaunchSpec, tool: str) -> str:
    """torchrun or python of the program's environment: the node's uv environment, or whatever
    the image's PATH finds (its own environment first, in images trainctl builds)."""
    return tool if spec.image else f"{node_paths(node)['venv']}/bin/{tool}"


def torchrun_args(inventory: Inventory, node: Node, spec: LaunchSpec, attempt: int = 0,
                  joiners: bool = False) -> list[str]:
    group = torch_group(inventory)
    rank0 = group[0]
    # All nodes may share a hostname (they do on the local stack): tell torchrun who hosts the
    # rendezvous store instead of letting it compare hostnames.
    rdzv_conf = f"is_host={'true' if node.rank == rank0.rank else 'false'}"
    if joiners:
        rdzv_conf += f",join_timeout={JOINERS_TIMEOUT_SECONDS}"
    target = torchrun_target(expand(command_for(spec, inventory, node), inventory, spec.run_id))
    return [
        program_tool(node, spec, "torchrun"),
        f"--nnodes={len(group)}",
        f"--nproc-per-node={spec.nproc_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={rank0.internal_ip}:{inventory.rendezvous_port}",
        # Each job attempt meets in a fresh rendezvous; the run id stays the same.
        f"--rdzv-id={spec.run_id}" + (f"-a{attempt}" if attempt else ""),
        f"--rdzv-conf={rdzv_conf}",
        f"--local-addr={node.internal_ip}",
        f"--max-restarts={spec.max_restarts}",
        "--monitor-interval=1",
        "--tee=3",
        *target,
    ]


TF_PORT = 2222


def tf_config(inventory: Inventory, node: Node) -> dict:
    """TF_CONFIG exactly as AI Platform sets it: chief, workers and parameter servers make up
    the cluster; an evaluator is not part of it, only its own task."""
    cluster = {role: [f"{n.internal_ip}:{TF_PORT}" for n in members(inventory, role)]
               for role in ("chief", "worker", "ps")}
    role, index = task_of(inventory, node)
    return {"cluster": {k: v for k, v in cluster.items() if v}, "task": {"type": role, "index": index},
            "environment": "cloud"}


def cluster_spec(inventory: Inventory, node: Node) -> dict:
    """CLUSTER_SPEC as Vertex AI sets it: every pool, the evaluator's too, by pool number."""
    pools = {f"workerpool{i}": [f"{n.internal_ip}:{TF_PORT}" for n in members(inventory, role)]
             for i, role in enumerate(POOL_ORDER)}
    role, index = task_of(inventory, node)
    return {"cluster": {k: v for k, v in pools.items() if v}, "environment": "cloud",
            "task": {"type": f"workerpool{POOL_ORDER.index(role)}", "index": index}}


def uses_torchrun(node: Node, spec: LaunchSpec, inventory: Inventory) -> bool:
    return (spec.framework == "torch" and node.accelerator.kind != "tpu"
            and task_of(inventory, node)[0] in ("chief", "worker"))


def tpu_type(node: Node) -> catalog.TpuType | None:
    return node.accelerator.spec if isinstance(node.accelerator, Tpu) else None


def program_nodes(inventory: Inventory, spec: LaunchSpec) -> list[Node]:
    """The nodes that run the user's program: all, except TensorFlow on a multi-host TPU slice,
    where a copy of the program on the other workers would fight their TF servers for the chips."""
    tpu = tpu_type(inventory.rank0)
    if spec.framework == "tensorflow" and tpu is not None and tpu.multi_host:
        return [inventory.rank0]
    return list(inventory.nodes)


def tpu_env(node: Node, spec: LaunchSpec) -> dict[str, str]:
    tpu = tpu_type(node)
    assert tpu is not None
    if spec.framework == "torch":
        return {"PJRT_DEVICE": "TPU"}
    if not tpu.multi_host:
        return {"TPU_NAME": "local", "NEXT_PLUGGABLE_DEVICE_USE_C_API": "true",
                "TF_PLUGGABLE_DEVICE_LIBRARY_PATH": "/lib/libtpu.so"}
    if not node.tpu_name:
        raise ConfigError(f"{node.name} is a worker of a multi-host {tpu.name} slice but the inventory "
                          "does not name the slice (tpu_name); run `trainctl up` again")
    # The pod runtime's TF server on this worker owns libtpu; the program only connects to it.
    return {"TPU_NAME": node.tpu_name, "TPU_LOAD_LIBRARY": "0"}


def direct_args(inventory: Inventory, node: Node, spec: LaunchSpec) -> list[str]:
    """The user's command as is, with `python` meaning the node environment's interpreter."""
    user = expand(command_for(spec, inventory, node), inventory, spec.run_id)
    if user[0] in ("python", "python3"):
        user = [program_tool(node, spec, "python"), *user[1:]]
    return user


HYPERTUNE_FILE_ENV = "CLOUD_ML_HP_METRIC_FILE"


def hypertune_file(node: Node, run_id: str) -> str:
    return f"{node_run_dir(node, run_id)}/hypertune/output.metrics"


def node_run_dir(node: Node, run_id: str) -> str:
    return f"{node_paths(node)['state']}/runs/{run_id}"


def job_workdir(node: Node, run_id: str, image: str | None) -> str:
    """Where the program runs on the node: the code folder bootstrap synced, or in an image
    (which holds the code) the run's own folder on the node."""
    return node_run_dir(node, run_id) if image else node_paths(node)["code"]


def node_command(inventory: Inventory, node: Node, spec: LaunchSpec, attempt: int = 0,
                 joiners: bool = False) -> str:
    p = node_paths(node)
    run_dir = node_run_dir(node, spec.run_id)
    env = {
        **inventory.node_env,
        **job_env(inventory, spec.run_id),
        **spec.env,
        "PYTHONUNBUFFERED": "1",
        # Marks every process of this run on the node, whatever session torchrun gives it,
        # so `stop` finds workers that outlived their agent.
        "TRAINCTL_RUN_ID": spec.run_id,
        "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": f"[{node.name} r${{rank}}]:",
        # where an unchanged cloudml-hypertune writes its reports (default /tmp/hypertune/...):
        # per run, on the node, for the sweep to read from the chief
        HYPERTUNE_FILE_ENV: hypertune_file(node, spec.run_id),
        "PATH": f"{p['venv']}/bin:/usr/local/bin:/usr/bin:/bin",
    }
    if node.interface:
        # gloo otherwise binds to the address the hostname resolves to (loopback here).
        env["GLOO_SOCKET_IFNAME"] = node.interface
    if tpu_type(node) is None:
        env["CLUSTER_SPEC"] = json.dumps(cluster_spec(inventory, node), separators=(",", ":"))
    if uses_torchrun(node, spec, inventory):
        env["LOGLEVEL"] = torchrun_agents.agent_log_level(spec.env)  # its groups' starts and ends
        argv = torchrun_args(inventory, node, spec, attempt, joiners)
    else:
        del env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"]
        argv = direct_args(inventory, node, spec)
        if tpu_type(node) is not None:
            env.update(tpu_env(node, spec))
        elif spec.framework == "tensorflow":
            env["TF_CONFIG"] = json.dumps(tf_config(inventory, node), separators=(",", ":"))
    if spec.image:
        inside = sorted(k for k in env if k != "PATH")  # the image's own PATH leads to its venv
        env.update(containers.container_env(node))
        argv = containers.run_argv(node, spec.image, inside, [run_dir], argv)
    workdir = job_workdir(node, spec.run_id, spec.image)
    return (f"mkdir -p {shlex.quote(run_dir)} && cd {shlex.quote(workdir)} && {shell_env(env)}"
            f"echo $$ > {shlex.quote(run_dir + '/launcher.pid')}; exec {join(argv)}")


def stop_command(run_id: str, grace: float = STOP_GRACE_SECONDS) -> str:
    """Kill every process on the node that carries the run's marker: TERM, up to `grace`
    seconds for them to leave (a trainer saving its checkpoint), then KILL. A torchrun agent
    (`python .../torchrun`) is not waited for once the rest are gone: it has nothing to save,
    and its own shutdown took 0.5-0.9 s here, which the survivors of a preemption waited on
    before they could start again."""
    return stop_marked(f"TRAINCTL_RUN_ID={run_id}", grace, unwaited="*'/torchrun '*")


def plan(inventory: Inventory, spec: LaunchSpec, attempt: int = 0, joiners: bool = False) -> dict[str, str]:
    """Each node's command. `joiners`: some nodes start later than the others (recreated ones,
    still being bootstrapped), and the others' agents wait for them that much longer."""
    if spec.framework == "torch" and members(inventory, "ps"):
        raise ConfigError(TORCH_HAS_NO_PS)
    return {node.name: node_command(inventory, node, spec, attempt, joiners)
            for node in program_nodes(inventory, spec)}


def servers(inventory: Inventory) -> list[Node]:
    """Parameter-server training: ps and worker replicas serve until the job is over, which
    the chief decides (as on Vertex AI, the primary replica's end is the job's)."""
    if not members(inventory, "ps"):
        return []
    return members(inventory, "ps") + members(inventory, "worker")


# ---------------------------------------------------------------------------------------------
# execution


@dataclass
class NodeOutcome:
    node: str
    rank: int
    exit_code: int | None = None
    error: str = ""
    collateral: bool = False  # stopped by trainctl because another node failed first
    released: bool = False  # a server stopped because the chief finished the job: not a failure
    preempted: bool = False  # its VM was reclaimed (spot): not the program's fault
    lost_at: float | None = None  # when trainctl learnt it was preempted (time.time())
    last_step: int | None = None  # the furthest step its program printed
    agent_state: torchrun_agents.AgentState | None = None  # its torchrun agent's, as it logged it
    worker_exit_code: int | None = None  # its program's last exit code (torchrun's agent: a worker's)
    resumed_step: int | None = None  # the step its program said it resumed from
    worker_tail: deque[str] = field(default_factory=lambda: deque(maxlen=10))  # the program's
    agent_tail: deque[str] = field(default_factory=lambda: deque(maxlen=25))  # torchrun's


@dataclass
class LaunchResult:
    run_id: str
    outcomes: list[NodeOutcome]
    attempts: int = 1
    permanent_failure: int | None = None  # a worker exit code from the permanent set
    cancelled: bool = False  # stopped on the caller's request (a pruned trial): never rerun
    recoveries: list[RecoveryRecord] = field(default_factory=list)  # preempted nodes brought back

    def worker_exit_codes(self) -> set[int]:
        """Exit codes of the failed programs, as torchrun's error summary reports them."""
        codes = set()
        for o in self.failures():
            for line in o.agent_tail:
                match = EXITCODE_RE.search(line)
                if match:
                    codes.add(int(match.group(1)))
        return codes

    def permanent(self, codes: tuple[int, ...]) -> bool:
        return self.permanent_failure is not None or bool(self.worker_exit_codes() & set(codes))

    @property
    def ok(self) -> bool:
        return all(o.exit_code == 0 or o.released for o in self.outcomes)

    def preempted(self) -> list[str]:
        return [o.node for o in self.outcomes if o.preempted]

    def lost_at(self) -> float:
        return min((o.lost_at for o in self.outcomes if o.lost_at), default=time.time())

    def last_step(self) -> int | None:
        return max((o.last_step for o in self.outcomes if o.last_step is not None), default=None)

    def resumed_step(self) -> int | None:
        return min((o.resumed_step for o in self.outcomes if o.resumed_step is not None), default=None)

    def failures(self) -> list[NodeOutcome]:
        """The nodes that caused the failure (not those stopped because of it)."""
        return [o for o in self.outcomes if o.exit_code != 0 and not o.collateral and not o.released]

    def failure(self) -> Failure | None:
        """What failed, as the programs showed it: the first failure no retry can fix, else the
        first failed node's (None: nothing failed)."""
        found = [failure_of(o) for o in self.failures()]
        return next((f for f in found if f.unfixable), found[0] if found else None)

    def describe_failures(self) -> str:
        lines = []
        for o in self.failures():
            why = o.error or failure_of(o).describe()
            lines.append(f"{o.node} (rank {o.rank}) failed: {why}; last lines of its program:")
            lines.extend(f"    {line}" for line in o.worker_tail)
            if o.agent_tail:
                lines.append("  and of its launcher:")
                lines.extend(f"    {line}" for line in list(o.agent_tail)[-8:])
        return "\n".join(lines)


def failure_of(outcome: NodeOutcome) -> Failure:
    if outcome.worker_exit_code is None and outcome.error:  # lost, or never ran its program
        return Failure(outcome.error)
    code = outcome.exit_code if outcome.worker_exit_code is None else outcome.worker_exit_code
    return classify(outcome.worker_tail, code)


class LinePrinter:
    """Splits a node's stream into lines, prefixes lines torchrun did not prefix, and keeps
    the node's log file and its last lines for error reports."""

    def __init__(self, node: str, log_path: Path, echo: Callable[[str], None], outcome: NodeOutcome,
                 on_worker_exit: Callable[[int], None] = lambda code: None,
                 direct_rank: int | None = None, quiet: threading.Event | None = None,
                 on_agent_change: Callable[[], None] | None = None):
        self.on_worker_exit = on_worker_exit
        # A torchrun agent's stream: its INFO lines are for the log and its state only (another
        # program's glog-style INFO lines, an `exec`'s, are shown as they are).
        self.on_agent_change = on_agent_change
        # Once set, torchrun's own lines go to the log only: once trainctl stops the run (a
        # cancel, a failure or preemption elsewhere) they are its shutdown traceback, not news.
        self.quiet = quiet
        # A program run without torchrun: all its lines are the worker's, prefixed here.
        self.direct_prefix = f"[{node} r{direct_rank}]:" if direct_rank is not None else None
        self.node = node
        self.log = open(log_path, "a")
        self.echo = echo
        self.outcome = outcome
        self.partial = ""
        self.lock = threading.Lock()

    def write(self, data: str) -> int:
        with self.lock:
            self.partial += data
            *lines, self.partial = self.partial.split("\n")
            for line in lines:
                self._emit(line)
        return len(data)

    def _emit(self, line: str) -> None:
        if self.direct_prefix:
            line = self.direct_prefix + line
        from_worker = line.startswith(f"[{self.node} ")
        shown = line if from_worker else f"[{self.node}] {line}"
        self.log.write(shown + "\n")
        if from_worker:
            self.outcome.worker_tail.append(shown)
            self.echo(shown)
            self._progress(line)
        else:
            self._agent_line(line, shown)

    def _agent_line(self, line: str, shown: str) -> None:
        state = torchrun_agents.state_after(line)
        if state is not None:
            self.outcome.agent_state = state
        if self.on_agent_change is not None and torchrun_agents.is_info(line):
            if state is not None:
                self.on_agent_change()
            return
        self.outcome.agent_tail.append(shown)
        if self.quiet is None or not self.quiet.is_set():
            self.echo(shown)
        match = torchrun_agents.WORKER_EXIT_RE.search(line)
        if match:
            self.on_worker_exit(int(match.group(1)))

    def _progress(self, line: str) -> None:
        resumed = RESUMED_RE.search(line)
        if resumed:
            step = int(resumed.group(1))
            if self.outcome.resumed_step is None:
                self.outcome.resumed_step = step
            self.outcome.last_step = max(self.outcome.last_step or 0, step)
            return
        for match in STEP_RE.finditer(line):
            self.outcome.last_step = max(self.outcome.last_step or 0, int(match.group(1)))

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        with self.lock:
            if self.partial:
                self._emit(self.partial)
                self.partial = ""
        self.log.close()


# Held open on every node for the run: GCE's metadata server answers `instance/preempted` as
# soon as the VM is being reclaimed (the local stack's does too); a host without a metadata
# server ends the watch at once. The node's shutdown then takes its processes within ~30 s:
# knowing why they died decides between a recovery and a failed run. Each wait is bounded and
# followed by a write, so the watch dies of SIGPIPE within 30 s of its session closing.
PREEMPTED_MARK = "TRAINCTL_PREEMPTED"
WATCH_PREEMPTION = (
    "u=http://metadata.google.internal/computeMetadata/v1/instance/preempted; h='Metadata-Flavor: Google'; "
    "v=$(curl -sf -H \"$h\" $u) || exit 0; "
    "while [ \"$v\" != TRUE ]; do printf . || exit 0; "
    "v=$(curl -sf -H \"$h\" \"$u?wait_for_change=true&timeout_sec=30\") || sleep 5; done; "
    f"echo {PREEMPTED_MARK}")


def watch_preemption(conn, node: Node, outcome: NodeOutcome, done: threading.Event,
                     on_preempted: Callable[[], None], echo: Callable[[str], None]) -> None:
    try:
        channel = conn.transport.open_session()
        channel.exec_command(WATCH_PREEMPTION)
        answer = b""
        while not done.is_set() and not channel.exit_status_ready():
            if channel.recv_ready():
                answer += channel.recv(1024)
            done.wait(0.2)
        answer += channel.recv(1024) if channel.recv_ready() else b""
        channel.close()
    except Exception:
        return  # the session ended with the run, or the node is gone: the heartbeat says so
    if PREEMPTED_MARK.encode() in answer and not done.is_set():
        if mark_preempted(outcome):
            echo(f"[trainctl] {node.name}: {outcome.error}")
        on_preempted()


_MARKING = threading.Lock()


def mark_preempted(outcome: NodeOutcome, why: str = "preempted: its spot VM is being reclaimed") -> bool:
    """Mark the node lost to a preemption; False if the watch or the session's end already did."""
    with _MARKING:
        if outcome.preempted:
            return False
        outcome.preempted, outcome.error = True, why
        outcome.lost_at = outcome.lost_at or time.time()
        return True


def is_preempted(conn) -> bool:
    try:
        answer = conn.run("curl -sf -H 'Metadata-Flavor: Google' http://metadata.google.internal/"
                          "computeMetadata/v1/instance/preempted", hide=True, warn=True, in_stream=False)
        return answer.stdout.strip() == "TRUE"
    except Exception:
        return False


def heartbeat(conn, node: Node, outcome: NodeOutcome, done: threading.Event,
              echo: Callable[[str], None]) -> None:
    """A node whose link is cut never closes its SSH session: TCP would notice after ~15 min.
    A tiny command every few seconds on the same connection notices in seconds; a node that
    misses HEARTBEAT_MISSES in a row is declared lost and its session is closed."""
    misses = 0
    while not done.wait(HEARTBEAT_SECONDS):
        try:
            channel = conn.transport.open_session(timeout=HEARTBEAT_SECONDS)
            try:
                channel.settimeout(HEARTBEAT_SECONDS)
                channel.exec_command("true")
                deadline = time.monotonic() + HEARTBEAT_SECONDS
                while not channel.exit_status_ready():
                    if time.monotonic() > deadline:
                        raise TimeoutError("no answer")
                    time.sleep(0.05)
                misses = 0
            finally:
                channel.close()
        except Exception:
            if done.is_set():
                return
            misses += 1
            if misses >= HEARTBEAT_MISSES:
                lost_for = HEARTBEAT_SECONDS * 2 * HEARTBEAT_MISSES
                outcome.error = f"node lost: no SSH heartbeat for about {lost_for:.0f} s (link cut or node down)"
                echo(f"[trainctl] {node.name}: {outcome.error}")
                conn.close()
                return


def stop_run(inventory: Inventory, run_id: str, nodes: list[Node] | None = None) -> None:
    """Stop the run's processes on the given nodes (all by default), in parallel."""
    targets = list(inventory.nodes) if nodes is None else nodes
    if not targets:
        return

    def stop(node: Node) -> None:
        try:
            conn = open_connection(inventory, node, deadline=time.monotonic() + 10)
            with conn:
                conn.run(stop_command(run_id), hide=True, warn=True, in_stream=False)
        except Exception:
            pass  # an unreachable node is torn down or reported elsewhere

    with ThreadPoolExecutor(max_workers=max(1, min(32, len(targets)))) as pool:
        list(pool.map(stop, targets))


def _stop_until_ended(inventory: Inventory, run_id: str, nodes: list[Node],
                      sessions: list[Future], reclaimed: frozenset[str] = frozenset()) -> None:
    """Stop the run everywhere, then again on each node whose session is still open (its command
    may have been starting while the first stop went out), until every session has ended.
    Nodes the provider is reclaiming are left to their shutdown, which sends their programs
    SIGTERM itself: connecting to a VM on its way out waits until it is gone (or until a new one
    answers at its address), and the survivors' restart would wait on that."""
    stop_run(inventory, run_id, [n for n in inventory.nodes if n.name not in reclaimed])
    while True:
        _, pending = wait_for_futures(sessions, timeout=RESTOP_SECONDS)
        if not pending:
            return
        stop_run(inventory, run_id, [n for n, f in zip(nodes, sessions)
                                     if not f.done() and n.name not in reclaimed])


@dataclass
class Recovery:
    """How a run gets reclaimed nodes back, from whoever owns the stack (`trainctl run`):
    `reclaimed(nodes)` says which of the nodes that stopped answering the provider has stopped or
    deleted (a preemption whose notice never arrived), `recreate(nodes)` brings them back and
    returns the inventory to go on with, `bootstrap(inventory, nodes)` puts code and environment
    on them while the others already start the job. `keeps_addresses`: recreated nodes come back
    at their old addresses (the provider says so), so nothing the others' commands name changes
    and they may start again before the recreation is done."""
    reclaimed: Callable[[list[str]], list[str]]
    recreate: Callable[[list[str]], Inventory]
    bootstrap: Callable[[Inventory, list[str]], None] = lambda _inventory, _nodes: None
    keeps_addresses: bool = False


# recreated nodes' inventory, the tries it took, and their bootstrap under way
Recovered = tuple[Inventory, int, Future[None]]


def once_joined(recovered: Future[Recovered]) -> Future[Inventory]:
    """The recreated nodes' inventory, once they are recreated and bootstrapped (chained by
    callbacks: no thread waits for it)."""
    joined: Future[Inventory] = Future()

    def recreated(f: Future[Recovered]) -> None:
        try:
            inventory, _tries, bootstrapped = f.result()
        except BaseException as exc:
            joined.set_exception(exc)
            return

        def bootstrap_done(b: Future[None]) -> None:
            try:
                b.result()
            except BaseException as exc:
                joined.set_exception(exc)
            else:
                joined.set_result(inventory)

        bootstrapped.add_done_callback(bootstrap_done)

    recovered.add_done_callback(recreated)
    return joined


@dataclass
class RecoveryRecord:
    nodes: list[str]
    lost_at: float  # when the first loss was noticed
    resumed_at: float  # when the job was started again on every node
    tries: int  # recreate attempts (more than 1: the provider had no capacity for a while)
    furthest_step: int | None  # the furthest step the program printed before the loss
    resumed_from_step: int | None = None  # the step it said it resumed from

    def joined(self, _recreated: Future) -> None:
        self.resumed_at = time.time()

    @property
    def seconds(self) -> float:
        return round(self.resumed_at - self.lost_at, 1)

    @property
    def steps_redone(self) -> int | None:
        if self.furthest_step is None or self.resumed_from_step is None:
            return None
        return max(0, self.furthest_step - self.resumed_from_step)


def recreate_with_backoff(recovery: Recovery, lost: list[str], echo: Callable[[str], None],
                          sleep: Callable[[float], None]) -> tuple[Inventory, int]:
    """Recreate lost nodes; while the provider has no capacity, try again after growing waits
    (the run's TTL bounds it all). Returns the inventory and the number of tries."""
    tries = 0
    while True:
        tries += 1
        try:
            return recovery.recreate(lost), tries
        except CapacityUnavailable as exc:
            wait = CAPACITY_BACKOFF_SECONDS[min(tries, len(CAPACITY_BACKOFF_SECONDS)) - 1]
            echo(f"[trainctl] no capacity for {', '.join(lost)} ({exc}): trying again in {wait:g} s")
            sleep(wait)


def interruptible_sleep(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        raise_if_pending()
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def find_reclaimed(result: LaunchResult, recovery: Recovery | None, echo: Callable[[str], None]) -> None:
    """Nodes lost without a preemption notice (no heartbeat, no connection): ask the provider
    whether it stopped or deleted them, which makes the loss a preemption to recover from."""
    silent = [o for o in result.failures() if not o.preempted and o.exit_code == -1]
    if recovery is None or not silent:
        return
    try:
        reclaimed = set(recovery.reclaimed([o.node for o in silent]))
    except Exception as exc:  # the provider cannot say: it stays a node failure
        echo(f"[trainctl] could not ask the provider about {', '.join(o.node for o in silent)}: {exc}")
        return
    for o in silent:
        if o.node in reclaimed and mark_preempted(o, "reclaimed: the provider stopped or deleted its VM"):
            echo(f"[trainctl] {o.node}: {o.error}")


def launch(inventory: Inventory, spec: LaunchSpec, log_dir: Path,
           echo: Callable[[str], None] = print, cancel: threading.Event | None = None,
           recovery: Recovery | None = None,
           sleep: Callable[[float], None] = interruptible_sleep) -> LaunchResult:
    """Run the job; rerun it (resuming from its checkpoints) up to job_retries times unless
    it failed for good. torchrun itself restarts failed workers up to max_restarts times.
    Setting `cancel` stops the job on every node, without a rerun (a sweep's pruned trial).
    Preempted nodes are recreated through `recovery` and the job resumes: a recovery (up to
    max_recoveries, waiting out capacity shortages), not one of the job's reruns. Recreating
    starts as soon as the loss is seen, while the survivors are still being stopped; the
    survivors start again once stopped where the recreated nodes keep their addresses
    (otherwise once those are known), and wait in torchrun's rendezvous for them."""
    recoveries: list[RecoveryRecord] = []
    recreating: dict[tuple[str, ...], Future[Recovered]] = {}
    background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="recreate")

    def recover(lost: list[str]) -> Recovered:
        """Recreate, then start the nodes' bootstrap at once (the survivors may still be
        stopping); it runs on while the job starts again on the others."""
        assert recovery is not None  # asked for only when there is one
        inventory, tries = recreate_with_backoff(recovery, lost, echo, sleep)
        return inventory, tries, background.submit(recovery.bootstrap, inventory, lost)

    def on_lost(lost: list[str]) -> None:
        if recovery is None or (spec.max_recoveries is not None and len(recoveries) >= spec.max_recoveries):
            return
        echo(f"[trainctl] recovery {len(recoveries) + 1}: recreating {', '.join(lost)} while the others "
             "stop, then resuming from the latest checkpoint")
        recreating[tuple(lost)] = background.submit(recover, lost)

    try:
        return _launch_until_done(inventory, spec, log_dir, echo, cancel, recovery, recoveries,
                                  recreating, on_lost, recover)
    except KeyboardInterrupt as exc:  # stopped everywhere (launch_once): say so, not "running"
        write_interrupted(log_dir, spec.run_id, str(exc) or "interrupted")
        raise
    finally:
        background.shutdown(wait=True, cancel_futures=True)


def _launch_until_done(inventory: Inventory, spec: LaunchSpec, log_dir: Path, echo: Callable[[str], None],
                       cancel: threading.Event | None, recovery: Recovery | None,
                       recoveries: list[RecoveryRecord],
                       recreating: dict[tuple[str, ...], Future[Recovered]],
                       on_lost: Callable[[list[str]], None],
                       recover: Callable[[list[str]], Recovered]) -> LaunchResult:
    result = launch_once(inventory, spec, log_dir, echo, 0, cancel, on_lost=on_lost)
    attempt = reruns = 0
    while not result.ok and not result.cancelled:
        joining: dict[str, Future[Inventory]] = {}
        pending: tuple[RecoveryRecord, Future[Recovered]] | None = None  # this attempt's recovery
        find_reclaimed(result, recovery, echo)
        lost = result.preempted()
        if lost:
            if recovery is None:
                echo(f"[trainctl] {', '.join(lost)} preempted; nothing recreates nodes for this "
                     "run (`trainctl run` of an experiment does): stopping")
                break
            if spec.max_recoveries is not None and len(recoveries) >= spec.max_recoveries:
                echo(f"[trainctl] {', '.join(lost)} preempted again: max_recoveries "
                     f"({spec.max_recoveries}) reached")
                break
            lost_at, furthest = result.lost_at(), result.last_step()
            # the survivors were stopped when the loss was seen (launch_once); recreating began then
            started = recreating.pop(tuple(lost), None)
            for other in list(recreating.values()):  # a subset, before more nodes went too
                with contextlib.suppress(Exception):
                    other.result()
            recreating.clear()
            if started is None:
                echo(f"[trainctl] recovery {len(recoveries) + 1}: recreating {', '.join(lost)}, then "
                     "resuming from the latest checkpoint")
                started = Future()
                started.set_result(recover(lost))
            rendezvous = all(uses_torchrun(n, spec, inventory) for n in program_nodes(inventory, spec))
            if rendezvous and torch_group(inventory)[0].name not in lost:
                if not recovery.keeps_addresses:
                    inventory = started.result()[0]  # the others' commands name the new addresses
                # The others start now: their agents (torch's import, the rendezvous) get ready
                # while the lost nodes are recreated and bootstrapped, then those join them.
                joining = dict.fromkeys(lost, once_joined(started))
            else:
                # Programs without torchrun's rendezvous to wait in, or a lost rendezvous host
                # (the others' agents would give up on its store after torch's 60 s): all start
                # together.
                inventory = started.result()[0]
                started.result()[2].result()
            record = RecoveryRecord(lost, lost_at, time.time(), 0, furthest)
            recoveries.append(record)
            pending = record, started
            for joined in set(joining.values()):  # every node runs again once they have joined
                joined.add_done_callback(record.joined)
        elif reruns >= spec.job_retries or rerun_refused(result, spec, inventory.stack, echo):
            break
        else:
            reruns += 1
            echo(f"[trainctl] job failed; rerun {reruns}/{spec.job_retries} from the latest checkpoint")
            stop_run(inventory, spec.run_id)
        attempt += 1
        result = launch_once(inventory, spec, log_dir, echo, attempt, cancel, on_lost=on_lost, joining=joining)
        for joined in set(joining.values()):
            joined.result()  # a node that could not be recreated or bootstrapped ends the run
        if pending is not None:
            record, recovered = pending
            inventory, record.tries, _ = recovered.result()
            record.resumed_from_step = result.resumed_step()
    result.attempts = attempt + 1
    result.recoveries = recoveries
    write_result(log_dir, result)
    return result


def rerun_refused(result: LaunchResult, spec: LaunchSpec, stack: str, echo: Callable[[str], None]) -> bool:
    """Whether a failed job must not be rerun (said why): a permanent exit code, a failure no
    retry can fix, or a stack that is gone."""
    failure = result.failure()
    if result.permanent(spec.permanent_exit_codes):
        echo(f"[trainctl] exit code {result.permanent_failure or sorted(result.worker_exit_codes())} "
             "is permanent: no retry")
    elif failure is not None and failure.unfixable:
        echo(f"[trainctl] no retry can fix {failure.error}: no rerun")
    elif not stack_still_up(stack):
        echo(f"[trainctl] stack {stack} was taken down: no retry")
    else:
        return False
    return True


NOT_STARTED = "not started: the run was stopping"


def wait_to_join(ready: Future[Inventory], stopping: threading.Event) -> Inventory | None:
    """Wait for a joining node to be recreated and bootstrapped (a failure raises): the inventory
    that has it; None if the run stops first."""
    while not stopping.is_set():
        try:
            return ready.result(timeout=0.2)
        except FutureTimeout:
            continue
    return None


def write_interrupted(log_dir: Path, run_id: str, why: str) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / RESULT_FILE).write_text(json.dumps({"run_id": run_id, "ok": False, "interrupted": why},
                                                  indent=2))


def write_result(log_dir: Path, result: LaunchResult) -> None:
    """Marks the run finished for `trainctl logs --follow` and `trainctl status --run`."""
    (log_dir / RESULT_FILE).write_text(json.dumps({
        "run_id": result.run_id, "ok": result.ok, "attempts": result.attempts,
        "recoveries": [{"nodes": r.nodes, "seconds": r.seconds, "tries": r.tries,
                        "resumed_from_step": r.resumed_from_step, "steps_redone": r.steps_redone}
                       for r in result.recoveries],
        "failures": [{"node": o.node, "rank": o.rank, "exit_code": o.exit_code, "error": o.error}
                     for o in result.failures()]}, indent=2))


def launch_once(inventory: Inventory, spec: LaunchSpec, log_dir: Path,
                echo: Callable[[str], None], attempt: int,
                cancel: threading.Event | None = None,
                on_lost: Callable[[list[str]], None] = lambda _: None,
                joining: Mapping[str, Future[Inventory]] | None = None) -> LaunchResult:
    """Run the plan on every node; on the first failure stop the rest. Blocks until done.
    `on_lost` hears of preempted nodes before the others are stopped. A node in `joining`
    starts when its future gives the inventory that has it recreated and bootstrapped (its
    host keys, its address), the others at once."""
    log_dir.mkdir(parents=True, exist_ok=True)
    joining = joining or {}
    commands = plan(inventory, spec, attempt, joiners=bool(joining))
    nodes = [n for n in inventory.nodes if n.name in commands]
    outcomes = {n.name: NodeOutcome(n.name, n.rank) for n in nodes}
    first_failure = threading.Event()
    stopping = threading.Event()
    chief_done = threading.Event()
    chief = members(inventory, "chief")[0].name if members(inventory, "chief") else None
    serving = [n for n in servers(inventory) if n.name in commands]
    # torchrun would restart the group: not after a permanent error, one no retry can fix, or
    # once other nodes' groups have finished (their agents never join its new rendezvous)
    stops = AttemptStops(outcomes, spec.permanent_exit_codes, first_failure.set)

    def run_on(node: Node) -> None:
        outcome = outcomes[node.name]

        def worker_exit(code: int) -> None:
            if not stopping.is_set():
                stops.worker_exited(node.name, code)

        direct = not uses_torchrun(node, spec, inventory)
        printer = LinePrinter(node.name, log_dir / f"{node.name}.log", echo, outcome, worker_exit,
                              direct_rank=node.rank if direct else None, quiet=stopping,
                              on_agent_change=None if direct else stops.agents_changed)
        done = threading.Event()
        try:
            reached: Inventory | None = inventory
            command = commands[node.name]
            if node.name in joining:
                reached = wait_to_join(joining[node.name], stopping)
                if reached is not None:
                    node = reached.node(node.name)
                    command = node_command(reached, node, spec, attempt, joiners=True)
            if reached is None:
                outcome.exit_code, outcome.error = -1, NOT_STARTED
            else:
                conn = open_connection(reached, node, deadline=time.monotonic() + 60)
                with conn:
                    if stopping.is_set():  # connected after the stop: never start
                        outcome.exit_code, outcome.error = -1, NOT_STARTED
                    else:
                        threading.Thread(target=heartbeat, args=(conn, node, outcome, done, echo),
                                         daemon=True).start()
                        threading.Thread(target=watch_preemption,
                                         args=(conn, node, outcome, done, first_failure.set, echo),
                                         daemon=True).start()
                        result = conn.run(command, warn=True, hide=False, pty=False,
                                          out_stream=printer, err_stream=printer, in_stream=False)
                        outcome.exit_code = result.exited
                        if result.exited and not outcome.preempted and is_preempted(conn):
                            # its processes (the watch among them) died of the VM's shutdown first
                            if mark_preempted(outcome):
                                echo(f"[trainctl] {node.name}: {outcome.error}")
                        if direct and result.exited and not outcome.preempted and not outcome.released:
                            worker_exit(result.exited)  # the program's own exit code
        except Exception as exc:
            outcome.exit_code = -1
            outcome.error = outcome.error or f"{type(exc).__name__}: {exc}"
        finally:
            done.set()
            printer.close()
        if node.name == chief and outcome.exit_code == 0:
            chief_done.set()
        if outcome.exit_code != 0 and not outcome.released:
            if outcome.preempted:
                first_failure.set()
            elif stopping.is_set() and node.name not in stops.causes:
                outcome.collateral = True
            else:
                first_failure.set()

    pool = ThreadPoolExecutor(max_workers=len(nodes))
    futures = [pool.submit(run_on, n) for n in nodes]
    try:
        while not all(f.done() for f in futures):
            raise_if_pending()
            if cancel is not None and cancel.is_set():
                stopping.set()
                echo(f"[trainctl] run {spec.run_id} cancelled: stopping it on every node")
                _stop_until_ended(inventory, spec.run_id, nodes, futures)
                break
            if serving and chief_done.is_set() and not any(outcomes[n.name].released for n in serving):
                # the job is done: its servers go (marked first, so their end is no failure)
                for n in serving:
                    outcomes[n.name].released = True
                echo(f"[trainctl] the chief finished: stopping the servers ({', '.join(n.name for n in serving)})")
                stop_run(inventory, spec.run_id, serving)
            if first_failure.wait(0.2):
                stopping.set()
                lost = [o.node for o in outcomes.values() if o.preempted]
                echo(f"[trainctl] {stops.why(lost)}: stopping run {spec.run_id} on the others")
                if lost and not stops.final:
                    on_lost(sorted(lost))
                _stop_until_ended(inventory, spec.run_id, nodes, futures, frozenset(lost))
                break
    except BaseException:
        stopping.set()
        echo(f"[trainctl] interrupted: stopping run {spec.run_id} on every node")
        _stop_until_ended(inventory, spec.run_id, nodes, futures)
        raise
    finally:
        pool.shutdown(wait=True)
    result = LaunchResult(spec.run_id, sorted(outcomes.values(), key=lambda o: o.rank),
                          permanent_failure=stops.permanent[1] if stops.permanent else None,
                          cancelled=cancel is not None and cancel.is_set())
    for name, why in stops.causes.items():
        outcomes[name].error = why
    return result
