"""Scripted pods: each pod prints the lines a script gives it and ends as the script says.

For tests of what drives a Job (the GKE launcher's restart policy, its log streaming, its
teardown): the script decides per Job attempt, completion index and pod try, so a test can make
pod 1 of the first attempt exit 137 and everything else succeed, without any program running.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from gcpsim.kubernetes.objects import Obj

if TYPE_CHECKING:
    from gcpsim.kubernetes.jobs import JobController


@dataclass(frozen=True)
class PodRun:
    """What one pod does: print its lines, then exit with exit_code (None: run until deleted)
    or be preempted (DisruptionTarget condition, exit 143 after SIGTERM)."""
    lines: tuple[str, ...] = ("step 1", "done")
    exit_code: int | None = 0
    preempted: bool = False


# (Job attempt: how many Jobs of that name were created before, completion index, pod try)
Script = Callable[[int, int, int], PodRun]
# The same, for tests that run several Jobs (a sweep's trials): the Job's name first.
JobScript = Callable[[str, int, int, int], PodRun]


class ScriptedPods:
    def __init__(self, script: Script | None = None) -> None:
        self.script: Script = script or (lambda attempt, index, try_: PodRun())
        self.job_script: JobScript | None = None  # when set, it decides instead of script

    def start(self, api: JobController, job: Obj, pod: Obj, attempt: int, tries: int) -> None:
        index = int(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
        run = (self.job_script(job["metadata"]["name"], attempt, index, tries) if self.job_script
               else self.script(attempt, index, tries))
        api.spawn(self._kubelet, api, pod, run)  # one thread per pod: pods run concurrently

    @staticmethod
    def _kubelet(api: JobController, pod: Obj, run: PodRun) -> None:
        if not api.container_started(pod, "10.0.0.1"):
            return
        for line in run.lines:
            api.container_output(pod, line)
        if run.preempted:
            api.container_exited(pod, 143, ("PreemptionByScheduler", "preempted to make room for a "
                                                                      "higher-priority pod"))
        elif run.exit_code is not None:
            api.container_exited(pod, run.exit_code)
        # else: it runs until it is deleted

    def stop(self, pod: Obj, grace: float) -> int | None:
        return None  # nothing runs: the scripted programs do not catch SIGTERM (143)

    def forget(self, job: Obj) -> None:
        pass

    def close(self) -> None:
        pass
