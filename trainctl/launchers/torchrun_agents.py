"""What torchrun's agents say about their worker groups, read from the lines they log.

An agent whose workers all exit 0 waits in torchrun's exit barrier for the other agents (300 s,
`exit_barrier_timeout` of LocalElasticAgent, which torchrun's command line does not expose) and
never joins another rendezvous. An agent whose worker fails restarts its group (while restarts
are left) through a new rendezvous round, which healthy agents join from their monitoring loop.
So once one node's workers have finished, a failure elsewhere can never be restarted: its
agent waits in a rendezvous nobody joins until the others' barrier times out, on every attempt
(a rank that crashes at exit after the others finished included). Seeing both is enough to end
the attempt at once.

torchrun logs a worker's failure at ERROR, but a group's start and success only at INFO: the
agents run with LOGLEVEL=INFO (torch.distributed.elastic's loggers read it), and those INFO
lines go to the node's log only, so the console shows what it would at torchrun's default.
"""

from __future__ import annotations

import re
from typing import Literal, Mapping

AGENT_LOG_LEVEL = "INFO"
# torch's glog-style INFO lines: "I1125 01:11:18.111000 25534 torch/.../api.py:715] ..."
INFO_LINE_RE = re.compile(r"^I\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ")
# torch/distributed/elastic/multiprocessing/api.py, once per failed worker (ERROR)
WORKER_EXIT_RE = re.compile(r"failed \(exitcode: (-?\d+)\)")
# torch/distributed/elastic/agent/server/api.py (INFO): after every rendezvous, and on success
GROUP_STARTED_RE = re.compile(r"\] \[[\w-]+\] Starting worker group$")
GROUP_FINISHED_RE = re.compile(r"\] \[[\w-]+\] worker group successfully finished")

AgentState = Literal["starting", "running", "failed", "finished"]


def agent_log_level(user_env: Mapping[str, str]) -> str:
    """INFO, unless the user asked torchrun for DEBUG, which says as much."""
    return "DEBUG" if user_env.get("LOGLEVEL", "").upper() == "DEBUG" else AGENT_LOG_LEVEL


def is_info(line: str) -> bool:
    return bool(INFO_LINE_RE.match(line))


def state_after(line: str) -> AgentState | None:
    """The agent's state once it has logged `line` (None: the line says nothing about it)."""
    if WORKER_EXIT_RE.search(line):
        return "failed"
    if GROUP_FINISHED_RE.search(line):
        return "finished"
    if GROUP_STARTED_RE.search(line):
        return "running"
    return None


def stranded(states: Mapping[str, AgentState]) -> tuple[list[str], list[str]]:
    """The nodes whose failed workers can never be restarted (a restart needs every agent in
    the new rendezvous), and the nodes whose finished groups keep them out of it; both empty
    when every failure can still be restarted."""
    failed = sorted(n for n, s in states.items() if s == "failed")
    finished = sorted(n for n, s in states.items() if s == "finished")
    return (failed, finished) if failed and finished else ([], [])
