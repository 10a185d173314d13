"""One attempt of a GKE run: one Job, from its creation until it ends and its pods' logs are in,
read by watches (polling when a watch breaks) and a log stream per pod; its result per index."""

from __future__ import annotations

import codecs
import queue
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable

from trainctl.launchers.gke.kube import Kube
from trainctl.launchers.gke.manifests import CONTAINER
from trainctl.launchers.gke.pods import PodSeen, disruption, has_started, terminated_state, waiting_reason
from trainctl.launchers.interrupts import raise_if_pending
from trainctl.launchers.lines import LinePrinter
from trainctl.launchers.result import LaunchResult, NodeOutcome
from trainctl.launchers.spec import LaunchSpec

LOG_DRAIN_SECONDS = 30.0  # once the Job has ended, for its pods' streams to deliver their last lines
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
UID_LABEL = "batch.kubernetes.io/controller-uid"


def _shutdown(response: Any) -> None:
    """Unblock a thread reading a streamed response (closing alone would wait for its read)."""
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Attempt:
    """One Job, from its creation until it ends and its pods' logs are in; the Job is deleted
    by the caller. Kubernetes is read by threads (two watches, a log stream per pod) that only
    queue what they read: lines are printed, and `echo` called, on the calling thread, so that
    an exception in `echo` (Ctrl-C) ends the run there, and teardown follows."""

    def __init__(self, kube: Kube, job: Any, spec: LaunchSpec, log_dir: Path,
                 echo: Callable[[str], None], poll: float, torchrun: bool,
                 cancel: threading.Event | None = None) -> None:
        self.kube, self.job_model, self.spec, self.log_dir = kube, job, spec, log_dir
        self.echo, self.poll, self.torchrun = echo, poll, torchrun
        self.cancel = cancel
        self.name: str = job.metadata.name
        self.events: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        self.stopped = threading.Event()
        self.pods: dict[str, PodSeen] = {}  # by pod name
        count = job.spec.completions
        self.outcomes = {i: NodeOutcome(f"pod{i}", i) for i in range(count)}
        self.job: Any = None  # V1Job, as last seen
        self.gone = False  # the Job was deleted, not by this attempt
        self.stopping = False  # this attempt deleted the Job
        self.permanent: tuple[int, int] | None = None  # (index, worker exit code) from torchrun's log
        self.watching = 0
        self.closers: list[Callable[[], None]] = []
        self.selector = ""

    def run(self) -> tuple[LaunchResult, bool]:
        """The attempt's result, and whether a rerun makes sense (not when the Job was deleted
        behind trainctl's back)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        version = self.create()
        self.echo(f"[trainctl] job {self.name}: {len(self.outcomes)} pod(s) in namespace {self.kube.ns}; "
                  f"logs in {self.log_dir}")
        try:
            self.follow(version)
            self.drain()
            return self.result(), not self.gone
        finally:
            self.stopped.set()
            for close in self.closers:
                close()
            for seen in self.pods.values():
                if seen.printer:
                    try:
                        seen.printer.close()
                    except BaseException:  # its last line's echo raised: the file still closes
                        seen.printer.log.close()

    def create(self) -> str:
        """Create the Job; the resourceVersion to watch from."""
        # The client's models make every field optional; what the API returns has them (Any).
        created: Any = self.kube.batch.create_namespaced_job(self.kube.ns, self.job_model,
                                                             field_validation="Strict")
        self.job = created
        self.selector = f"{UID_LABEL}={created.metadata.uid}"
        return str(created.metadata.resource_version)

    def stop_jobs(self) -> None:
        """Delete the attempt's Job now (its pods go in the background)."""
        self.stopping = True
        self.kube.delete_job(self.name, 0, self.poll)

    def read_jobs(self) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.on_job("MODIFIED", self.kube.batch.read_namespaced_job_status(self.name, self.kube.ns))
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.on_job("DELETED", self.job)

    def index_of(self, pod: Any) -> int:
        return int((pod.metadata.labels or {})[INDEX_LABEL])

    # -- reading the cluster ----------------------------------------------------------------

    def follow(self, job_version: str) -> None:
        pods: Any = self.kube.core.list_namespaced_pod(self.kube.ns, label_selector=self.selector)
        for pod in pods.items:
            self.on_pod(pod)
        self.watch("job", self.kube.batch.list_namespaced_job, resource_version=job_version, **self.job_selector())
        self.watch("pod", self.kube.core.list_namespaced_pod, label_selector=self.selector,
                   resource_version=pods.metadata.resource_version)
        synced = time.monotonic()
        while not self.over():
            raise_if_pending()
            if self.cancelled():
                self.echo(f"[trainctl] run {self.spec.run_id} cancelled: stopping job {self.name}")
                self.stop_jobs()
                return
            self.handle_events(self.poll)
            if self.watching < 2 and time.monotonic() - synced >= self.poll:
                self.sync()
                synced = time.monotonic()
        if self.permanent and not self.gone:
            index, code = self.permanent
            self.echo(f"[trainctl] permanent exit code {code} on pod{index}: stopping job {self.name}")
            self.stop_jobs()

    def job_selector(self) -> dict[str, str]:
        return {"field_selector": f"metadata.name={self.name}"}

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def over(self) -> bool:
        return self.gone or self.permanent is not None or self.condition() in ("Complete", "Failed")

    def condition(self) -> str:
        return job_condition(self.job)

    def drain(self) -> None:
        """Every pod that ran has its log streamed to the end (bounded: a stream can hang); then
        the final states are read once more, after all that the watches had queued."""
        self.sync()
        deadline = time.monotonic() + LOG_DRAIN_SECONDS
        while any(s.printer and not s.ended for s in self.pods.values()) and time.monotonic() < deadline:
            raise_if_pending()
            self.handle_events(min(self.poll, max(0.0, deadline - time.monotonic())))
        self.handle_events(0)
        self.sync()

    def sync(self) -> None:
        """Read the Job and its pods once: the watches' fallback, and a consistent final view."""
        self.read_jobs()
        listed: list[Any] = self.kube.core.list_namespaced_pod(self.kube.ns, label_selector=self.selector).items
        for pod in listed:
            self.on_pod(pod)
        names = {p.metadata.name for p in listed}
        for seen in self.pods.values():
            seen.gone = seen.gone or seen.name not in names

    def watch(self, kind: str, list_call: Callable[..., Any], **selector: Any) -> None:
        from kubernetes import watch

        stream = watch.Watch()
        self.closers.append(stream.stop)

        def pump() -> None:
            why = "the server ended it"
            try:
                for event in stream.stream(list_call, self.kube.ns, **selector):
                    self.events.put((kind, event["type"], event["object"]))
            except Exception as exc:
                why = f"{type(exc).__name__}: {exc}"
            if not self.stopped.is_set():
                self.events.put(("watch-ended", kind, why))

        self.watching += 1
        threading.Thread(target=pump, name=f"watch-{kind}", daemon=True).start()

    def stream_log(self, name: str) -> None:
        """The pod's log from its start, followed until the container ends (one thread)."""
        error = None
        try:
            response: Any = self.kube.core.read_namespaced_pod_log(  # raw: a urllib3 response
                name, self.kube.ns, container=CONTAINER, follow=True, _preload_content=False)
            self.closers.append(lambda: _shutdown(response))
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            for chunk in response.stream(amt=None, decode_content=False):
                self.events.put(("data", name, decoder.decode(chunk)))
            self.events.put(("data", name, decoder.decode(b"", final=True)))
            response.release_conn()
        except Exception as exc:
            if not self.stopped.is_set():
                error = f"{type(exc).__name__}: {exc}"
        self.events.put(("eof", name, error))

    # -- what was read ------------------------------------------------------------------------

    def handle_events(self, timeout: float) -> None:
        """Handle what the threads queued: wait up to `timeout` for the first, take the rest."""
        try:
            event = self.events.get(timeout=timeout) if timeout > 0 else self.events.get_nowait()
            while True:
                self.on_event(*event)
                event = self.events.get_nowait()
        except queue.Empty:
            pass

    def on_event(self, kind: str, a: Any, b: Any) -> None:
        if kind == "job":
            self.on_job(a, b)
        elif kind == "pod":
            self.on_pod(b, deleted=a == "DELETED")
        elif kind == "data":
            printer = self.pods[a].printer
            if printer:
                printer.write(b)
        elif kind == "eof":
            seen = self.pods[a]
            seen.ended = True
            if b and not seen.gone:
                self.echo(f"[trainctl] pod{seen.index}: log stream of {a} broke: {b}")
        elif kind == "watch-ended":
            self.watching -= 1
            self.echo(f"[trainctl] watch of the {a}s ended ({b}); polling every {self.poll:g} s")

    def on_job(self, event: str, job: Any) -> None:
        if job is None or job.metadata.uid != self.job.metadata.uid:
            return
        self.job = self.seen_job(event, job, self.job)

    def seen_job(self, event: str, job: Any, last: Any) -> Any:
        """A Job of the attempt as just read, in place of `last` (kept where it was deleted); its
        deletion by someone else, or its failure, is said once."""
        if event == "DELETED":
            if not self.stopping and not self.gone and not self.condition():
                self.echo(f"[trainctl] job {job.metadata.name} was deleted outside trainctl")
                self.gone = True
            return last
        if job_condition(job) == "Failed" and not job_condition(last):
            cond = next(c for c in job.status.conditions if c.type == "Failed")
            self.echo(f"[trainctl] job {job.metadata.name} failed: {cond.reason}: {cond.message}")
        return job

    def on_pod(self, pod: Any, deleted: bool = False) -> None:
        name = pod.metadata.name
        seen = self.pods.get(name)
        if seen is None:
            index = self.index_of(pod)
            if any(s.index == index for s in self.pods.values()):
                self.echo(f"[trainctl] pod{index}: replacement pod {name}")
            seen = self.pods[name] = PodSeen(name, index, len(self.pods), pod)
        seen.obj, seen.gone = pod, seen.gone or deleted
        if seen.printer is None and has_started(pod) and not seen.gone:
            seen.printer = LinePrinter(f"pod{seen.index}", self.log_dir / f"pod{seen.index}.log", self.echo,
                                       self.outcomes[seen.index], self.worker_exit(seen.index),
                                       direct_rank=None if self.torchrun else seen.index)
            threading.Thread(target=self.stream_log, args=(name,), name=f"log-{name}", daemon=True).start()
        terminated, news = terminated_state(pod), waiting_reason(pod)
        if terminated and terminated.exit_code != 0 and not pod.metadata.deletion_timestamp:
            why = disruption(pod)
            news = (f"{name} was disrupted ({why}); replaced without spending a restart" if why
                    else f"{name} exited with code {terminated.exit_code}")
        if news and news != seen.said:
            seen.said = news
            self.echo(f"[trainctl] pod{seen.index}: {news}")

    def worker_exit(self, index: int) -> Callable[[int], None]:
        def seen(code: int) -> None:
            # torchrun would restart the workers; a permanent error must not be retried at all.
            if code in self.spec.permanent_exit_codes and self.permanent is None:
                self.permanent = (index, code)
        return seen

    # -- the outcome ----------------------------------------------------------------------------

    def result(self) -> LaunchResult:
        """Per index, its latest pod decides. A pod that failed on its own caused the failure;
        one deleted before it finished (by the Job controller once the Job failed, or by
        trainctl) is collateral."""
        latest = {s.index: s for s in sorted(self.pods.values(),
                                             key=lambda s: (s.obj.metadata.creation_timestamp, s.seq))}
        permanent = None
        for index, outcome in self.outcomes.items():
            seen = latest.get(index)
            terminated = terminated_state(seen.obj) if seen else None
            outcome.exit_code = terminated.exit_code if terminated else None
            if seen is None:  # its pods came and went between two looks (a fast failure)
                outcome.collateral = bool(self.condition() or self.stopping)
                outcome.error = "trainctl never saw its pod"
            elif outcome.exit_code != 0 and (seen.obj.metadata.deletion_timestamp or seen.gone or self.stopping):
                outcome.collateral = True
                outcome.error = "stopped: the job was ending"
            elif terminated is None:
                outcome.error = "its pod never finished"
            if self.gone:
                outcome.collateral = False
                outcome.error = f"job {self.name} was deleted outside trainctl"
            elif not self.torchrun and outcome.exit_code in self.spec.permanent_exit_codes \
                    and not outcome.collateral:
                permanent = permanent or outcome.exit_code
                outcome.error = f"permanent error: its program exited with code {outcome.exit_code}"
        if self.permanent:
            index, permanent = self.permanent
            self.outcomes[index].collateral = False
            self.outcomes[index].error = f"permanent error: its program exited with code {permanent}"
        if not any(o.exit_code != 0 and not o.collateral for o in self.outcomes.values()):
            for outcome in self.outcomes.values():  # no cause seen: report every failure
                outcome.collateral = False
        return LaunchResult(self.spec.run_id, list(self.outcomes.values()), permanent_failure=permanent,
                            cancelled=self.cancelled())


def job_condition(job: Any) -> str:
    """"Complete" or "Failed" once the Job (V1Job, as last seen) has ended, else ""."""
    for cond in (job.status.conditions or []) if job is not None and job.status else []:
        if cond.type in ("Complete", "Failed") and cond.status == "True":
            return str(cond.type)
    return ""
