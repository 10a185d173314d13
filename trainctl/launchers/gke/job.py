"""GKE runs: the launch spec as an Indexed Job that trainctl follows to its end, as it follows
the nodes of a VM stack over SSH.

One attempt is one Job. trainctl creates it, watches it and its pods (watches from the
resourceVersion it was created at; polling when a watch breaks), streams every pod's log to the
console with the VM stacks' prefixes (`[pod1 r3]:` for the program, `[pod1]` for torchrun's own
lines) and into runs/<run>/logs/launch/attempt-NN/pod<index>.log, and maps the restart policy:

  max_restarts          pod restarts inside the Job (backoffLimit); a disrupted pod (preempted,
                        evicted) is replaced without spending it (podFailurePolicy: Ignore)
  permanent_exit_codes  the Job fails at once (podFailurePolicy: FailJob on the program's exit
                        code); under torchrun the pod's exit code is torchrun's, so the worker's
                        exit code is read from torchrun's log and trainctl stops the Job, as on SSH
  job_retries           a failed Job is deleted and created again (a new attempt: the trainers
                        resume from their checkpoints)

The Job and the Service are deleted on every exit path (the Job in the foreground, so its pods
go first); the ServiceAccount stays: every run of the stack uses it.
"""

from __future__ import annotations

import codecs
import queue
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from infra.spec import catalog
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from infra.errors import RemoteError
from infra.spec.stack_config import ConfigError
from trainctl.launchers.gke.manifests import CONTAINER, import_kubernetes, manifests, names, validate
from trainctl.launchers.interrupts import raise_if_pending, uninterruptible
from trainctl.launchers.lines import LinePrinter
from trainctl.launchers.result import LaunchResult, NodeOutcome, write_result
from trainctl.launchers.spec import LaunchSpec

POLL_SECONDS = 2.0
LOG_DRAIN_SECONDS = 30.0  # once the Job has ended, for its pods' streams to deliver their last lines
DELETE_WAIT_SECONDS = 300.0  # a foreground deletion lasts as long as the pods' grace period
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
UID_LABEL = "batch.kubernetes.io/controller-uid"
QUIET_WAITS = ("ContainerCreating", "PodInitializing")  # waiting reasons not worth a message


def _discard(response: Any) -> None:
    """Read and release a raw response. Deletions are read raw: a Job deleted in the foreground
    answers with the Job itself, which the client's V1Status model refuses."""
    response.data
    response.release_conn()


class Kube:
    """The Kubernetes calls of a run, in one namespace."""

    def __init__(self, inventory: Inventory, namespace: str, streams: int) -> None:
        import_kubernetes()
        from kubernetes import client, config

        if not inventory.kubeconfig:
            raise ConfigError(f"stack {inventory.stack} has no kubeconfig (not a GKE stack?)")
        configuration = client.Configuration()
        # One connection per log stream, two watches and the calls in between.
        configuration.connection_pool_maxsize = streams + 8
        self.api = config.new_client_from_config(config_file=inventory.kubeconfig, persist_config=False,
                                                 client_configuration=configuration)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.ns = namespace

    def keep_or_create(self, create: Callable[..., Any], body: Any) -> bool:
        """Create; an object of that name already there is kept. True when created."""
        from kubernetes.client.exceptions import ApiException

        try:
            create(self.ns, body, field_validation="Strict")
            return True
        except ApiException as exc:
            if exc.status != 409:
                raise
            return False

    def job_exists(self, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.batch.read_namespaced_job(name, self.ns)
            return True
        except ApiException as exc:
            if exc.status != 404:
                raise
            return False

    def delete_job(self, name: str, wait: float, poll: float) -> None:
        """Foreground: the Job stays until its pods are gone, so `wait` covers the pods too."""
        from kubernetes.client.exceptions import ApiException

        try:
            _discard(self.batch.delete_namespaced_job(name, self.ns, propagation_policy="Foreground",
                                                      _preload_content=False))
        except ApiException as exc:
            if exc.status != 404:
                raise
        deadline = time.monotonic() + wait
        while wait and self.job_exists(name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {name} still terminating after {wait:.0f} s")
            time.sleep(poll)

    def delete_service(self, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            _discard(self.core.delete_namespaced_service(name, self.ns, _preload_content=False))
        except ApiException as exc:
            if exc.status != 404:
                raise


def run_job(cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec, log_dir: Path,
            echo: Callable[[str], None] = print, *, image: str | None = None, gsa: str | None = None,
            namespace: str = catalog.GKE_KSA_NAMESPACE, poll: float = POLL_SECONDS,
            cancel: threading.Event | None = None, objects: list[dict[str, Any]] | None = None) -> LaunchResult:
    """Run the job on a GKE stack until it succeeds, fails for good, or has no reruns left;
    rerun a failed Job (resuming from its checkpoints) up to job_retries times. Blocks; writes
    RESULT_FILE into log_dir as `launch()` does; deletes the Job and the Service however it ends.
    Setting `cancel` (a sweep's pruned trial) deletes the Job and ends the run without a rerun.
    `objects`: the ServiceAccount, Service and Job as a launch plan has them (default: made here)."""
    if namespace != catalog.GKE_KSA_NAMESPACE:
        raise ConfigError(f"namespace {namespace!r}: the pods' service account is bound to the bucket "
                          f"in namespace {catalog.GKE_KSA_NAMESPACE!r} only (Workload Identity)")
    planned = objects if objects is not None else manifests(cluster, inventory, spec, image, gsa)
    service_account, service, job = (validate(o) for o in planned)
    job_name, service_name = names(spec)
    kube = Kube(inventory, namespace, cluster.node_count)
    kube.keep_or_create(kube.core.create_namespaced_service_account, service_account)
    if kube.job_exists(job_name):  # before the try: its teardown would delete someone's run
        raise ConfigError(f"a job {job_name} is already running in namespace {namespace} (run "
                          f"{spec.run_id} launched twice?); pick another run id or `kubectl delete "
                          f"job {job_name} --cascade=foreground` first")
    try:
        kube.keep_or_create(kube.core.create_namespaced_service, service)
        attempt = 0
        while True:
            result, retryable = Attempt(kube, job, spec, log_dir / f"attempt-{attempt + 1:02d}",
                                        echo, poll, torchrun=spec.framework == "torch" and not cluster.tpu,
                                        cancel=cancel).run()
            if result.ok or result.cancelled or attempt >= spec.job_retries or not retryable:
                break
            if result.permanent(spec.permanent_exit_codes):
                echo(f"[trainctl] exit code {result.permanent_failure or sorted(result.worker_exit_codes())} "
                     "is permanent: no retry")
                break
            failure = result.failure()
            if failure is not None and failure.unfixable:
                echo(f"[trainctl] no retry can fix {failure.error}: no rerun")
                break
            attempt += 1
            echo(f"[trainctl] job failed; rerun {attempt}/{spec.job_retries} from the latest checkpoint")
            kube.delete_job(job_name, DELETE_WAIT_SECONDS, poll)
        result.attempts = attempt + 1
    except BaseException:
        teardown(kube, job_name, service_name, echo, poll)
        raise
    left = teardown(kube, job_name, service_name, echo, poll)
    write_result(log_dir, result)  # the run's outcome is known even if its cleanup failed
    if left:
        raise RemoteError(left)
    return result


def teardown(kube: Kube, job: str, service: str, echo: Callable[[str], None], poll: float) -> str:
    """Delete the Job (and wait for its pods) and the Service; never cut short by a signal.
    Returns what could not be deleted, and how to delete it by hand ("" when all went)."""
    failed = []
    with uninterruptible():
        for what, delete in ((f"job {job}", lambda: kube.delete_job(job, DELETE_WAIT_SECONDS, poll)),
                             (f"service {service}", lambda: kube.delete_service(service))):
            try:
                delete()
            except Exception as exc:
                failed.append(f"{what}: {type(exc).__name__}: {exc}")
    if failed:
        message = (f"could not delete {'; '.join(failed)}; delete them with `kubectl delete job {job} "
                   f"--cascade=foreground; kubectl delete service {service}`")
        try:
            echo(f"[trainctl] {message}")
        except BaseException:
            pass  # the caller's error (or the one in flight) says it
        return message
    return ""


@dataclass
class PodSeen:
    """The last state seen of one pod of the attempt, and its log stream."""
    name: str
    index: int
    seq: int  # the order in which trainctl first saw it
    obj: Any  # V1Pod
    printer: LinePrinter | None = None
    ended: bool = False  # its log stream has ended
    gone: bool = False  # deleted from the API
    said: str = ""  # the last waiting reason or exit reported for it


def _container(pod: Any) -> Any:
    """The trainer container's status (V1ContainerStatus), or None before it has one."""
    statuses = (pod.status.container_statuses if pod.status else None) or []
    return next((s for s in statuses if s.name == CONTAINER), None)


def _conditions(pod: Any) -> list[Any]:
    return list((pod.status.conditions if pod.status else None) or [])


def _terminated(pod: Any) -> Any:
    """The trainer container's terminated state (V1ContainerStateTerminated), or None."""
    status = _container(pod)
    return status.state.terminated if status and status.state else None


def _started(pod: Any) -> bool:
    status = _container(pod)
    return bool(status and status.state and (status.state.running or status.state.terminated))


def _waiting(pod: Any) -> str:
    """Why the pod is not running yet, when it is worth telling (scheduling, image pull)."""
    for cond in _conditions(pod):
        if cond.type == "PodScheduled" and cond.status == "False":
            return f"{cond.reason}: {cond.message}"
    status = _container(pod)
    waiting = status.state.waiting if status and status.state else None
    if waiting and waiting.reason not in QUIET_WAITS:
        return f"{waiting.reason}: {waiting.message or ''}".rstrip(": ")
    return ""


def _disrupted(pod: Any) -> str:
    for cond in _conditions(pod):
        if cond.type == "DisruptionTarget" and cond.status == "True":
            return str(cond.reason or "disrupted")
    return ""


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
        # The client's models make every field optional; what the API returns has them (Any).
        created: Any = self.kube.batch.create_namespaced_job(self.kube.ns, self.job_model,
                                                             field_validation="Strict")
        self.job = created
        self.selector = f"{UID_LABEL}={created.metadata.uid}"
        self.echo(f"[trainctl] job {self.name}: {len(self.outcomes)} pod(s) in namespace {self.kube.ns}; "
                  f"logs in {self.log_dir}")
        try:
            self.follow(created.metadata.resource_version)
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

    # -- reading the cluster ----------------------------------------------------------------

    def follow(self, job_version: str) -> None:
        pods: Any = self.kube.core.list_namespaced_pod(self.kube.ns, label_selector=self.selector)
        for pod in pods.items:
            self.on_pod(pod)
        self.watch("job", self.kube.batch.list_namespaced_job,
                   field_selector=f"metadata.name={self.name}", resource_version=job_version)
        self.watch("pod", self.kube.core.list_namespaced_pod, label_selector=self.selector,
                   resource_version=pods.metadata.resource_version)
        synced = time.monotonic()
        while not self.over():
            raise_if_pending()
            if self.cancelled():
                self.echo(f"[trainctl] run {self.spec.run_id} cancelled: stopping job {self.name}")
                self.stopping = True
                self.kube.delete_job(self.name, 0, self.poll)
                return
            self.handle_events(self.poll)
            if self.watching < 2 and time.monotonic() - synced >= self.poll:
                self.sync()
                synced = time.monotonic()
        if self.permanent and not self.gone:
            index, code = self.permanent
            self.echo(f"[trainctl] permanent exit code {code} on pod{index}: stopping job {self.name}")
            self.stopping = True
            self.kube.delete_job(self.name, 0, self.poll)

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def over(self) -> bool:
        return self.gone or self.permanent is not None or self.condition() in ("Complete", "Failed")

    def condition(self) -> str:
        for cond in (self.job.status.conditions or []) if self.job and self.job.status else []:
            if cond.type in ("Complete", "Failed") and cond.status == "True":
                return str(cond.type)
        return ""

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
        from kubernetes.client.exceptions import ApiException

        try:
            self.on_job("MODIFIED", self.kube.batch.read_namespaced_job_status(self.name, self.kube.ns))
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.on_job("DELETED", self.job)
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
        if event == "DELETED":
            if not self.stopping and not self.gone and not self.condition():
                self.echo(f"[trainctl] job {self.name} was deleted outside trainctl")
                self.gone = True
            return
        before = self.condition()
        self.job = job
        if self.condition() == "Failed" and not before:
            cond = next(c for c in job.status.conditions if c.type == "Failed")
            self.echo(f"[trainctl] job {self.name} failed: {cond.reason}: {cond.message}")

    def on_pod(self, pod: Any, deleted: bool = False) -> None:
        name = pod.metadata.name
        seen = self.pods.get(name)
        if seen is None:
            index = int((pod.metadata.labels or {})[INDEX_LABEL])
            if any(s.index == index for s in self.pods.values()):
                self.echo(f"[trainctl] pod{index}: replacement pod {name}")
            seen = self.pods[name] = PodSeen(name, index, len(self.pods), pod)
        seen.obj, seen.gone = pod, seen.gone or deleted
        if seen.printer is None and _started(pod) and not seen.gone:
            seen.printer = LinePrinter(f"pod{seen.index}", self.log_dir / f"pod{seen.index}.log", self.echo,
                                       self.outcomes[seen.index], self.worker_exit(seen.index),
                                       direct_rank=None if self.torchrun else seen.index)
            threading.Thread(target=self.stream_log, args=(name,), name=f"log-{name}", daemon=True).start()
        terminated, news = _terminated(pod), _waiting(pod)
        if terminated and terminated.exit_code != 0 and not pod.metadata.deletion_timestamp:
            why = _disrupted(pod)
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
            terminated = _terminated(seen.obj) if seen else None
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
