"""A small Kubernetes API server on loopback, for the GKE launcher's tests.

It answers, in the real API's JSON shapes, exactly the endpoints trainctl uses: create, read and
delete of ServiceAccounts, Services and Jobs (and a Job's /status), lists and `watch=true` streams
of Jobs and Pods with label and field selectors, and pod logs (`follow=true` streams chunked, as
the kubelet does). Bodies are checked against the kubernetes client's models: an unknown field
is refused with 400 (fieldValidation=Strict), and the Job fields the launcher relies on with 422,
as the API server's validation does. Every request is recorded.

Behind it runs a scripted cluster: creating a Job starts one pod per completion index, named
<job>-<index>-<suffix> and labelled as the Job controller labels them; a per-test script gives
each pod its log lines and its fate (exit code, or preempted, or running until deleted) per Job
attempt and per pod try; the Job controller's rules decide the rest: replacement pods within
backoffLimit, the podFailurePolicy's Ignore / FailJob / Count, FailureTarget then Failed,
SuccessCriteriaMet then Complete, and the deletion propagation policies (the API's default for a
Job is to orphan its pods).
"""

from __future__ import annotations

import copy
import json
import re
import secrets
import threading
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import parse_qsl, urlsplit

import pytest

TOKEN = "fake-token"
WATCH_SECONDS = 30  # a watch without timeoutSeconds ends after this, as the server's does

# resource -> (apiVersion, kind, the client's model for request bodies)
KINDS = {"serviceaccounts": ("v1", "ServiceAccount", "V1ServiceAccount"),
         "services": ("v1", "Service", "V1Service"),
         "jobs": ("batch/v1", "Job", "V1Job"),
         "pods": ("v1", "Pod", "V1Pod")}
GROUP = {"jobs": "jobs.batch"}  # how a Status message names the resource
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"

Obj = dict[str, Any]


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


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int = 0
    routed: bool = True


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_obj(code: int, reason: str, message: str, **details: Any) -> Obj:
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.body = status_obj(code, reason, message, **details)


def unknown_fields(raw: Any, known: Any, path: str = "") -> list[str]:
    """Fields of a request body that the typed model dropped (written apart from trainctl's own
    check on purpose: the fake is the oracle)."""
    if isinstance(raw, dict) and isinstance(known, dict):
        out: list[str] = []
        for key, value in raw.items():
            if value is None:
                continue
            out += [path + key] if key not in known else unknown_fields(value, known[key], f"{path}{key}.")
        return out
    if isinstance(raw, list) and isinstance(known, list):
        return [p for i, (r, k) in enumerate(zip(raw, known))
                for p in unknown_fields(r, k, f"{path.rstrip('.')}[{i}].")]
    return []


def check_body(resource: str, body: Any) -> None:
    from kubernetes.client import ApiClient

    api_version, kind, model = KINDS[resource]
    if not isinstance(body, dict) or body.get("kind") != kind or body.get("apiVersion") != api_version:
        raise ApiError(400, "BadRequest", f"expected {api_version} {kind} in the body")
    client = ApiClient()
    try:
        typed = client.deserialize(json.dumps(body), model, "application/json")
    except Exception as exc:
        raise ApiError(400, "BadRequest", f"{kind} in version {api_version} cannot be handled: {exc}")
    unknown = unknown_fields(body, client.sanitize_for_serialization(typed))
    if unknown:
        raise ApiError(400, "BadRequest", "strict decoding error: "
                       + ", ".join(f'unknown field "{p}"' for p in unknown))


def check_job(job: Obj) -> None:
    """The API server's validation of the Job fields the launcher sets (422 Invalid)."""
    spec, errors = job["spec"], []
    pod = spec["template"]["spec"]
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        errors.append("spec.completions: Required value: when completion mode is Indexed")
    if spec.get("backoffLimit", 0) < 0:
        errors.append("spec.backoffLimit: Invalid value: must be greater than or equal to 0")
    rules = (spec.get("podFailurePolicy") or {}).get("rules", [])
    if rules and pod.get("restartPolicy") != "Never":
        errors.append("spec.template.spec.restartPolicy: Invalid value: only Never is supported "
                      "when podFailurePolicy is specified")
    containers = {c["name"] for c in pod["containers"]}
    for i, rule in enumerate(rules):
        where = f"spec.podFailurePolicy.rules[{i}]"
        if rule.get("action") not in ("FailJob", "FailIndex", "Ignore", "Count"):
            errors.append(f"{where}.action: Unsupported value: {rule.get('action')!r}")
        if rule.get("action") == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
            errors.append(f"{where}.action: Invalid value: requires the backoffLimitPerIndex field")
        codes, conditions = rule.get("onExitCodes"), rule.get("onPodConditions")
        if (codes is None) == (conditions is None):
            errors.append(f"{where}: Invalid value: specify one of onExitCodes and onPodConditions")
        if codes is not None:
            values = codes.get("values") or []
            if codes.get("operator") not in ("In", "NotIn"):
                errors.append(f"{where}.onExitCodes.operator: Unsupported value: {codes.get('operator')!r}")
            if not 1 <= len(values) <= 255:
                errors.append(f"{where}.onExitCodes.values: Invalid value: between 1 and 255 values")
            if any(b <= a for a, b in zip(values, values[1:])):
                errors.append(f"{where}.onExitCodes.values: Invalid value: must be ordered and unique")
            if codes.get("operator") == "In" and 0 in values:
                errors.append(f"{where}.onExitCodes.values: Invalid value: 0 with the In operator")
            if codes.get("containerName") not in (None, *containers):
                errors.append(f"{where}.onExitCodes.containerName: Invalid value: no such container")
    if errors:
        name = job["metadata"]["name"]
        raise ApiError(422, "Invalid", f'Job.batch "{name}" is invalid: ' + "; ".join(errors),
                       name=name, group="batch", kind="Job")


def parse_selector(selector: str) -> list[tuple[str, str, str]]:
    """Equality-based selectors (a=b, a==b, a!=b), comma-joined; the set-based forms are refused."""
    terms = []
    for term in filter(None, selector.split(",")):
        match = re.fullmatch(r"([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)", term.strip())
        if not match:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {term!r} (the fake "
                                              "only knows equality-based selectors)")
        terms.append((match[1], match[2], match[3]))
    return terms


def selector_matches(selector: str, values: dict[str, str]) -> bool:
    return all((values.get(key) == value) != (op == "!=") for key, op, value in parse_selector(selector))


class FakeKubernetes:
    def __init__(self, script: Script | None = None) -> None:
        self.script: Script = script or (lambda attempt, index, try_: PodRun())
        self.job_script: JobScript | None = None  # when set, it decides instead of script
        self.cond = threading.Condition()
        self.rv = 0
        self.objects: dict[tuple[str, str, str], Obj] = {}  # (resource, namespace, name)
        self.history: list[tuple[int, str, str, Obj]] = []  # (rv, resource, event type, object)
        self.logs: dict[str, list[str]] = {}  # pod uid -> lines written so far
        self.requests: list[Request] = []
        self.job_attempts: Counter[str] = Counter()
        self.pod_tries: Counter[tuple[str, int]] = Counter()
        self.closing = False
        self.break_watches = False  # answer watches with 500, as a broken proxy might
        self.threads: list[threading.Thread] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else each small reply waits ~40 ms for a delayed ACK

            def do_GET(self) -> None:
                fake.handle(self, "GET")

            def do_POST(self) -> None:
                fake.handle(self, "POST")

            def do_DELETE(self) -> None:
                fake.handle(self, "DELETE")

            def do_PUT(self) -> None:
                fake.handle(self, "PUT")

            def do_PATCH(self) -> None:
                fake.handle(self, "PATCH")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.serving = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.serving.start()

    # ----------------------------------------------------------------- test-facing helpers

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def write_kubeconfig(self, path: Path) -> Path:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}))
        return path

    def refused(self) -> list[Request]:
        """Requests the server refused as malformed or did not know: never expected."""
        return [r for r in self.requests if not r.routed or r.status in (400, 401, 405, 422)]

    def calls(self, method: str, pattern: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and re.fullmatch(pattern, r.path)]

    def names(self, resource: str) -> list[str]:
        with self.cond:
            return sorted(name for (res, _, name) in self.objects if res == resource)

    def close(self) -> None:
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        self.server.shutdown()
        self.server.server_close()
        for thread in self.threads:
            thread.join(timeout=5)

    # ----------------------------------------------------------------- HTTP

    ROUTES = [
        (re.compile(r"/api/v1/namespaces/([^/]+)/(serviceaccounts|services|pods)"), "collection"),
        (re.compile(r"/apis/batch/v1/namespaces/([^/]+)/(jobs)"), "collection"),
        (re.compile(r"/api/v1/namespaces/([^/]+)/(serviceaccounts|services|pods)/([^/]+)"), "object"),
        (re.compile(r"/apis/batch/v1/namespaces/([^/]+)/(jobs)/([^/]+)(/status)?"), "object"),
        (re.compile(r"/api/v1/namespaces/([^/]+)/(pods)/([^/]+)/log"), "log"),
    ]

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(h.path)
        query = dict(parse_qsl(url.query))
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        request = Request(method, url.path, query, body)
        with self.cond:
            self.requests.append(request)
        try:
            if h.headers.get("Authorization") != f"Bearer {TOKEN}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            for pattern, kind in self.ROUTES:
                match = pattern.fullmatch(url.path)
                if match:
                    getattr(self, f"_{kind}")(h, request, method, *match.groups())
                    return
            request.routed = False
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        except ApiError as exc:
            request.status = exc.body["code"]
            self._send(h, exc.body["code"], exc.body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away mid-stream (a watch or log stopped): normal

    def _send(self, h: BaseHTTPRequestHandler, code: int, body: Obj) -> None:
        data = json.dumps(body).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _stream(self, h: BaseHTTPRequestHandler, request: Request, content_type: str,
                chunks: Iterator[bytes]) -> None:
        request.status = 200
        h.send_response(200)
        h.send_header("Content-Type", content_type)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for chunk in chunks:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            h.wfile.flush()
        h.wfile.write(b"0\r\n\r\n")

    def _collection(self, h: BaseHTTPRequestHandler, request: Request, method: str, ns: str,
                    resource: str) -> None:
        if method == "POST" and resource != "pods":
            created = self.create(resource, ns, request.body, request.query)
            request.status = 201
            self._send(h, 201, created)
        elif method == "GET" and request.query.get("watch") in ("true", "1"):
            if self.break_watches:
                raise ApiError(500, "InternalError", "the fake was told to break watches")
            parse_selector(request.query.get("labelSelector", ""))  # refused before the stream starts
            parse_selector(request.query.get("fieldSelector", ""))
            self._stream(h, request, "application/json", self.watch(resource, ns, request.query))
        elif method == "GET":
            with self.cond:
                items = [copy.deepcopy(o) for o in self.select(resource, ns, request.query)]
                rv = str(self.rv)
            for item in items:  # list items carry no kind/apiVersion of their own
                item.pop("kind"), item.pop("apiVersion")
            request.status = 200
            self._send(h, 200, {"kind": KINDS[resource][1] + "List", "apiVersion": KINDS[resource][0],
                                "metadata": {"resourceVersion": rv}, "items": items})
        else:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported here")

    def _object(self, h: BaseHTTPRequestHandler, request: Request, method: str, ns: str,
                resource: str, name: str, subresource: str | None = None) -> None:
        if method == "GET":
            with self.cond:
                obj = copy.deepcopy(self.get(resource, ns, name))
            request.status = 200
            self._send(h, 200, obj)
        elif method == "DELETE" and not subresource:
            options = request.body if isinstance(request.body, dict) else {}
            policy = request.query.get("propagationPolicy") or options.get("propagationPolicy")
            answer = self.delete(resource, ns, name, policy)
            request.status = 200
            self._send(h, 200, answer)
        else:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported here")

    def _log(self, h: BaseHTTPRequestHandler, request: Request, method: str, ns: str, _resource: str,
             name: str) -> None:
        if method != "GET":
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported here")
        with self.cond:
            pod = self.get("pods", ns, name)
            containers = [c["name"] for c in pod["spec"]["containers"]]
            container = request.query.get("container") or containers[0]
            if container not in containers:
                raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
            state = pod["status"]["containerStatuses"][0]["state"]
            if "waiting" in state:
                raise ApiError(400, "BadRequest", f'container "{container}" in pod "{name}" is waiting '
                                                  f'to start: {state["waiting"]["reason"]}')
            uid = pod["metadata"]["uid"]
        follow = request.query.get("follow") in ("true", "1")
        self._stream(h, request, "text/plain", self.log_lines(ns, name, uid, follow))

    # ----------------------------------------------------------------- the API's store

    def get(self, resource: str, ns: str, name: str) -> Obj:
        obj = self.objects.get((resource, ns, name))
        if obj is None:
            raise ApiError(404, "NotFound", f'{GROUP.get(resource, resource)} "{name}" not found',
                           name=name, kind=resource)
        return obj

    def select(self, resource: str, ns: str, query: dict[str, str]) -> list[Obj]:
        return [o for (res, o_ns, _), o in self.objects.items()
                if res == resource and o_ns == ns and self.matches(o, query)]

    def matches(self, obj: Obj, query: dict[str, str]) -> bool:
        fields = {"metadata.name": obj["metadata"]["name"], "metadata.namespace": obj["metadata"]["namespace"]}
        return (selector_matches(query.get("labelSelector", ""), obj["metadata"].get("labels") or {})
                and selector_matches(query.get("fieldSelector", ""), fields))

    def record(self, resource: str, event: str, obj: Obj) -> None:
        """Store a change under a new resourceVersion and wake watchers (hold self.cond)."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        key = (resource, obj["metadata"]["namespace"], obj["metadata"]["name"])
        if event == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        self.history.append((self.rv, resource, event, copy.deepcopy(obj)))
        self.cond.notify_all()

    def create(self, resource: str, ns: str, body: Any, query: dict[str, str]) -> Obj:
        if query.get("fieldValidation", "Strict") == "Strict":
            check_body(resource, body)
        meta = body.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value: name or generateName is required")
        if meta.get("namespace", ns) != ns:
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match "
                                              "the namespace sent on the request")
        if resource == "jobs":
            check_job(body)
        with self.cond:
            if (resource, ns, name) in self.objects:
                raise ApiError(409, "AlreadyExists", f'{GROUP.get(resource, resource)} "{name}" already exists',
                               name=name, kind=resource)
            obj = copy.deepcopy(body)
            obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now())
            if resource == "jobs":
                self.default_job(obj)
            self.record(resource, "ADDED", obj)
            created = copy.deepcopy(obj)
            if resource == "jobs":  # the Job controller creates the pods after the Job exists
                self.start_job(obj)
            return created

    def delete(self, resource: str, ns: str, name: str, policy: str | None) -> Obj:
        with self.cond:
            obj = self.get(resource, ns, name)
            done = status_obj(200, "", "", name=name, kind=resource, uid=obj["metadata"]["uid"])
            done.update(status="Success")
            done.pop("message"), done.pop("reason")
            # Services, ServiceAccounts and pods answer with the deleted object (their storage
            # sets ReturnDeletedObject); a Job deleted at once with a Status, else with itself.
            if resource == "pods":
                self.kill(obj)
                return copy.deepcopy(obj)
            if resource != "jobs":
                self.record(resource, "DELETED", obj)
                return copy.deepcopy(obj)
            if obj["metadata"].get("deletionTimestamp"):  # already going
                return copy.deepcopy(obj)
            pods = self.pods_of(obj)
            policy = policy or "Orphan"  # the batch/v1 API's default for Jobs
            if policy == "Foreground":
                # The Job stays, marked, until the garbage collector has deleted its pods.
                obj["metadata"].update(deletionTimestamp=now(), finalizers=["foregroundDeletion"])
                self.record(resource, "MODIFIED", obj)
                self.spawn(self.collect, obj, pods)
                return copy.deepcopy(obj)
            self.record(resource, "DELETED", obj)
            if policy == "Background":
                self.spawn(self.collect, None, pods)
            else:
                for pod in pods:
                    pod["metadata"].pop("ownerReferences", None)
                    self.record("pods", "MODIFIED", pod)
            return done

    def collect(self, job: Obj | None, pods: list[Obj]) -> None:
        """The garbage collector: delete the dependents, then the owner held by foregroundDeletion."""
        with self.cond:
            for pod in pods:
                if ("pods", pod["metadata"]["namespace"], pod["metadata"]["name"]) in self.objects:
                    self.kill(pod)
            if job is not None and self.objects.get(("jobs", job["metadata"]["namespace"],
                                                     job["metadata"]["name"])) is job:
                self.record("jobs", "DELETED", job)

    def watch(self, resource: str, ns: str, query: dict[str, str]) -> Iterator[bytes]:
        def event(kind: str, obj: Obj) -> bytes:
            return json.dumps({"type": kind, "object": obj}).encode() + b"\n"

        with self.cond:
            since = query.get("resourceVersion", "")
            if since in ("", "0"):  # start from the current state, as synthetic ADDED events
                backlog = [event("ADDED", copy.deepcopy(o)) for o in self.select(resource, ns, query)]
                position = len(self.history)
            else:
                backlog = []
                position = next((i for i, h in enumerate(self.history) if h[0] > int(since)),
                                len(self.history))
        yield from backlog
        seconds = float(query.get("timeoutSeconds") or WATCH_SECONDS)
        deadline = threading.Event()
        timer = threading.Timer(seconds, self._wake, (deadline,))
        timer.daemon = True
        timer.start()
        try:
            while True:
                with self.cond:
                    self.cond.wait_for(lambda: len(self.history) > position or self.closing or deadline.is_set())
                    if self.closing or (deadline.is_set() and len(self.history) <= position):
                        return
                    new, position = self.history[position:], len(self.history)
                for _, res, kind, obj in new:
                    if res == resource and obj["metadata"]["namespace"] == ns and self.matches(obj, query):
                        yield event(kind, obj)
        finally:
            timer.cancel()

    def _wake(self, flag: threading.Event) -> None:
        flag.set()
        with self.cond:
            self.cond.notify_all()

    def log_lines(self, ns: str, name: str, uid: str, follow: bool) -> Iterator[bytes]:
        """The container's output so far; with follow, also what comes, until it ends."""
        sent = 0
        while True:
            with self.cond:
                if follow:
                    self.cond.wait_for(lambda: len(self.logs[uid]) > sent or self.closing
                                       or not self.running(ns, name, uid))
                lines, sent = self.logs[uid][sent:], len(self.logs[uid])
                ended = not follow or self.closing or not self.running(ns, name, uid)
            if lines:
                yield "".join(line + "\n" for line in lines).encode()
            if ended and not lines:
                return

    def running(self, ns: str, name: str, uid: str) -> bool:
        pod = self.objects.get(("pods", ns, name))
        return (pod is not None and pod["metadata"]["uid"] == uid
                and "terminated" not in pod["status"]["containerStatuses"][0]["state"])

    # ----------------------------------------------------------------- the Job controller

    def default_job(self, job: Obj) -> None:
        """What the API server adds to a new Job: its selector and the pods' identifying labels."""
        meta, spec = job["metadata"], job["spec"]
        uid, name = meta["uid"], meta["name"]
        ids = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
               "controller-uid": uid, "job-name": name}
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template_meta = spec["template"].setdefault("metadata", {})
        template_meta["labels"] = {**(template_meta.get("labels") or {}), **ids}
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
        meta["generation"] = 1
        job["status"] = {}

    def start_job(self, job: Obj) -> None:
        name = job["metadata"]["name"]
        attempt = self.job_attempts[name]
        self.job_attempts[name] += 1
        job["status"].update(startTime=now(), active=0, succeeded=0, failed=0, ready=0)
        for index in range(job["spec"]["completions"]):
            self.start_pod(job, index, attempt)
        self.record("jobs", "MODIFIED", job)

    def start_pod(self, job: Obj, index: int, attempt: int) -> None:
        meta, spec = job["metadata"], job["spec"]
        tries = self.pod_tries[(meta["uid"], index)]
        self.pod_tries[(meta["uid"], index)] += 1
        template = copy.deepcopy(spec["template"])
        pod_spec = template["spec"]
        pod_spec.update(hostname=f"{meta['name']}-{index}", nodeName="gke-fake-node")
        name = f"{meta['name']}-{index}-{secrets.token_hex(3)[:5]}"
        container = pod_spec["containers"][0]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": meta["namespace"], "uid": str(uuid.uuid4()),
                            "creationTimestamp": now(),
                            "labels": {**template["metadata"]["labels"], INDEX_LABEL: str(index)},
                            "annotations": {INDEX_LABEL: str(index)},
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                                 "uid": meta["uid"], "controller": True,
                                                 "blockOwnerDeletion": True}]},
               "spec": pod_spec,
               "status": {"phase": "Pending",
                          "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}],
                          "containerStatuses": [{"name": container["name"], "image": container["image"],
                                                 "imageID": "", "ready": False, "restartCount": 0,
                                                 "state": {"waiting": {"reason": "ContainerCreating"}}}]}}
        self.logs[pod["metadata"]["uid"]] = []
        job["status"]["active"] += 1
        self.record("pods", "ADDED", pod)
        run = (self.job_script(meta["name"], attempt, index, tries) if self.job_script
               else self.script(attempt, index, tries))
        self.spawn(self.kubelet, pod, run)

    def spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()

    def kubelet(self, pod: Obj, run: PodRun) -> None:
        """Runs the pod as its script says; one thread per pod, so pods run concurrently."""
        status, uid = pod["status"], pod["metadata"]["uid"]
        with self.cond:
            if not self.running(pod["metadata"]["namespace"], pod["metadata"]["name"], uid):
                return
            status.update(phase="Running", podIP="10.0.0.1", startTime=now())
            status["containerStatuses"][0].update(ready=True, started=True,
                                                  state={"running": {"startedAt": now()}})
            self.record("pods", "MODIFIED", pod)
        for line in run.lines:
            with self.cond:
                if self.closing or not self.running(pod["metadata"]["namespace"], pod["metadata"]["name"], uid):
                    return
                self.logs[uid].append(line)
                self.cond.notify_all()
        if run.exit_code is None and not run.preempted:
            return  # runs until it is deleted
        with self.cond:
            if self.closing or not self.running(pod["metadata"]["namespace"], pod["metadata"]["name"], uid):
                return
            if run.preempted:
                status["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                             "reason": "PreemptionByScheduler", "lastTransitionTime": now(),
                                             "message": "preempted to make room for a higher-priority pod"})
            self.terminate(pod, 143 if run.preempted else run.exit_code or 0)
            self.pod_finished(pod)

    def terminate(self, pod: Obj, code: int) -> None:
        status = pod["status"]
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        started = status["containerStatuses"][0]["state"].get("running", {}).get("startedAt", now())
        status["containerStatuses"][0].update(ready=False, started=False, state={"terminated": {
            "exitCode": code, "reason": "Completed" if code == 0 else "Error",
            "startedAt": started, "finishedAt": now()}})
        self.record("pods", "MODIFIED", pod)

    def kill(self, pod: Obj) -> None:
        """Graceful deletion: marked, SIGTERM (the fake's programs do not catch it), gone."""
        pod["metadata"]["deletionTimestamp"] = now()
        if "terminated" not in pod["status"]["containerStatuses"][0]["state"]:
            self.terminate(pod, 143)
        self.record("pods", "DELETED", pod)

    def pods_of(self, job: Obj) -> list[Obj]:
        uid = job["metadata"]["uid"]
        return [o for (res, _, _), o in self.objects.items()
                if res == "pods" and any(r["uid"] == uid for r in o["metadata"].get("ownerReferences", []))]

    def pod_finished(self, pod: Obj) -> None:
        owners = pod["metadata"].get("ownerReferences") or []
        if not owners:  # orphaned when its Job was deleted
            return
        owner = owners[0]
        job = self.objects.get(("jobs", pod["metadata"]["namespace"], owner["name"]))
        if job is None or job["metadata"]["uid"] != owner["uid"] or job["metadata"].get("deletionTimestamp"):
            return
        status, spec = job["status"], job["spec"]
        if any(c["type"] in ("FailureTarget", "SuccessCriteriaMet") for c in status.get("conditions", [])):
            return
        index = int(pod["metadata"]["labels"][INDEX_LABEL])
        status["active"] -= 1
        code = pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
        if code == 0:
            status["succeeded"] += 1
            done = sorted({int(i) for i in filter(None, status.get("completedIndexes", "").split(","))} | {index})
            status["completedIndexes"] = ",".join(map(str, done))  # the real one writes ranges: 0-2
            if len(done) == spec["completions"]:
                status["completionTime"] = now()
                self.finish(job, "SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods")
                self.finish(job, "Complete", "CompletionsReached", "Reached expected number of succeeded pods")
            self.record("jobs", "MODIFIED", job)
            return
        action, rule = self.policy_action(spec, pod, code)
        if action == "Ignore":
            self.start_pod(job, index, self.job_attempts[job["metadata"]["name"]] - 1)
        elif action == "FailJob":
            self.fail(job, "PodFailurePolicy", f"Container {pod['spec']['containers'][0]['name']} for pod "
                      f"{pod['metadata']['namespace']}/{pod['metadata']['name']} failed with exit code "
                      f"{code} matching FailJob rule at index {rule}")
        else:
            status["failed"] += 1
            if status["failed"] > spec["backoffLimit"]:
                self.fail(job, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
            else:
                self.start_pod(job, index, self.job_attempts[job["metadata"]["name"]] - 1)
        self.record("jobs", "MODIFIED", job)

    @staticmethod
    def policy_action(spec: Obj, pod: Obj, code: int) -> tuple[str, int]:
        """The first podFailurePolicy rule that matches the failed pod decides; none: Count."""
        conditions = {(c["type"], c["status"]) for c in pod["status"].get("conditions", [])}
        for i, rule in enumerate((spec.get("podFailurePolicy") or {}).get("rules", [])):
            codes = rule.get("onExitCodes")
            if codes:
                name = codes.get("containerName")
                if name in (None, pod["spec"]["containers"][0]["name"]) and code != 0 and \
                        (code in codes["values"]) == (codes["operator"] == "In"):
                    return rule["action"], i
            for pattern in rule.get("onPodConditions") or []:
                if (pattern["type"], pattern.get("status", "True")) in conditions:
                    return rule["action"], i
        return "Count", -1

    def fail(self, job: Obj, reason: str, message: str) -> None:
        """FailureTarget first, then the Job's remaining pods are deleted, then Failed."""
        self.finish(job, "FailureTarget", reason, message)
        self.record("jobs", "MODIFIED", job)
        for pod in self.pods_of(job):
            if "terminated" not in pod["status"]["containerStatuses"][0]["state"]:
                self.kill(pod)
        job["status"].update(active=0, ready=0)
        self.finish(job, "Failed", reason, message)

    @staticmethod
    def finish(job: Obj, kind: str, reason: str, message: str) -> None:
        job["status"].setdefault("conditions", []).append(
            {"type": kind, "status": "True", "reason": reason, "message": message,
             "lastProbeTime": now(), "lastTransitionTime": now()})


@pytest.fixture
def k8s() -> Iterator[FakeKubernetes]:
    fake = FakeKubernetes()
    yield fake
    fake.close()


# --------------------------------------------------------------------------- trainctl on the fake

GSA = "runner@p.iam.gserviceaccount.com"
POLL = 0.02  # the launcher's polling interval in tests (waits for deletions, watch fallback)


def launch_job(fake: FakeKubernetes, tmp_path: Path, *, run_id: str = "r1", framework: str = "tensorflow",
               echo: Callable[[str], None] | None = None, cancel: threading.Event | None = None,
               **spec: Any) -> tuple[Any, list[str]]:
    """trainctl.gke_run.run_job on the gke-l4 stack (2 pods), through the real kubernetes client
    and a kubeconfig that points at the fake; returns the result and the echoed lines."""
    from infra.inventory import Inventory
    from infra.stack_config import load_stack
    from trainctl.gke_run import run_job
    from trainctl.launch import LaunchSpec

    lines: list[str] = []
    inventory = Inventory(stack="gke-l4", provider="gcp", nodes=(), bucket_uri="gs://bkt", ssh_private_key="",
                          known_hosts="", gke_service_account=GSA,
                          kubeconfig=str(fake.write_kubeconfig(tmp_path / "kubeconfig")))
    launch = LaunchSpec(run_id=run_id, framework=framework, command=("python", "train.py"), **spec)
    result = run_job(load_stack("gke-l4"), inventory, launch, tmp_path / "runs" / run_id / "logs" / "launch",
                     echo or lines.append, poll=POLL, cancel=cancel)
    return result, lines
