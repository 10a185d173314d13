"""One error hierarchy; its classes decide trainctl's exit codes (trainctl/cli/entry.py main).

  ConfigError     2  bad input, refused before anything is created; the message names the input
  ProvisionError  3  creating or removing resources failed (a realizer); `down` cleans up
                     (and namespace_nodes.netns.CommandFailed, the node machinery's own)
  RemoteError     1  work on the nodes failed (bootstrap, a job, a teardown of a job)
  BudgetReached   4  a run or sweep stopped (checkpointed) so as not to exceed its budget's max_usd
  RunCancelled  130  a run stopped on request (`trainctl cancel`), what it trained collected
  interrupted   130  Ctrl-C, SIGTERM, SIGHUP (not an exception class: KeyboardInterrupt)
Anything else is a bug in trainctl and keeps its traceback.
"""

from __future__ import annotations


class TrainctlError(Exception):
    exit_code = 1
    title = "failed"  # the headline above the message


class ConfigError(TrainctlError):
    """Bad user input: printed as is, exit code 2, raised before anything is created."""

    exit_code = 2


class ProvisionError(TrainctlError):
    exit_code = 3
    title = "provisioning failed"


class RemoteError(TrainctlError):
    exit_code = 1
    title = "failed on the nodes"


class CapacityUnavailable(ProvisionError):
    """The provider has no capacity for the nodes right now (GCE: ZONE_RESOURCE_POOL_EXHAUSTED,
    a spot stockout): worth trying again later, unlike other provisioning errors."""

    title = "no capacity"


class BudgetReached(TrainctlError):
    """A run or sweep stopped itself, its checkpoint saved, before spending more than its
    budget's max_usd: not a failure of the work, and not the user's interrupt."""

    exit_code = 4
    title = "stopped at its budget"


class RunCancelled(TrainctlError):
    """A run stopped on request (`trainctl cancel` of a detached run): its job stopped on every
    node, what it trained collected, its stack torn down; the user's interrupt, said in words."""

    exit_code = 130
    title = "cancelled"
