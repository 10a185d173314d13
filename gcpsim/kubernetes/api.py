"""A Kubernetes API server: the endpoints the GKE launcher uses, in the real API's JSON shapes.

Create, read and delete of ServiceAccounts, Services and Jobs (and a Job's /status), lists and
`watch=true` streams of Jobs and Pods with label and field selectors, and pod logs
(`follow=true` streams chunked, as the kubelet does). Every request must carry the bearer token
the cluster's credential helper hands out (401 otherwise), and is recorded. Served over TLS
with a certificate the cluster's CA signed (a simulated cluster), or plain HTTP on loopback
(the launcher's own tests, which point a kubeconfig at it with a token).

Hand-written over a web framework on purpose: a few routes, chunked streams, and the standard
library's threading server is all the transport that needs.
"""

from __future__ import annotations

import copy
import json
import re
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qsl, urlsplit

from gcpsim.kubernetes.crds import CustomResources
from gcpsim.kubernetes.jobs import PodRunner
from gcpsim.kubernetes.objects import KINDS, KubeError, Obj, parse_selector
from gcpsim.kubernetes.store import Request

ROUTES = [
    (re.compile(r"/api/v1/namespaces/([^/]+)/(serviceaccounts|services|pods|events)"), "collection"),
    (re.compile(r"/apis/batch/v1/namespaces/([^/]+)/(jobs)"), "collection"),
    (re.compile(r"/apis/apps/v1/namespaces/([^/]+)/(daemonsets)"), "collection"),
    (re.compile(r"/apis/networking\.gke\.io/v1()/(gkenetworkparamsets|networks)"), "collection"),  # cluster-scoped
    (re.compile(r"/api/v1/namespaces/([^/]+)/(serviceaccounts|services|pods)/([^/]+)"), "object"),
    (re.compile(r"/apis/batch/v1/namespaces/([^/]+)/(jobs)/([^/]+)(/status)?"), "object"),
    (re.compile(r"/apis/apps/v1/namespaces/([^/]+)/(daemonsets)/([^/]+)"), "object"),
    (re.compile(r"/apis/networking\.gke\.io/v1()/(gkenetworkparamsets|networks)/([^/]+)"), "object"),
    (re.compile(r"/api/v1/namespaces/([^/]+)/(pods)/([^/]+)/log"), "log"),
    (re.compile(r"/apis/?"), "discovery"),
    # What an admin installs (crds.py): served once its CustomResourceDefinition exists.
    (re.compile(r"/apis/apiextensions\.k8s\.io/v1()/(customresourcedefinitions)"), "collection"),
    (re.compile(r"/apis/jobset\.x-k8s\.io/v1alpha2/namespaces/([^/]+)/(jobsets)"), "collection"),
    (re.compile(r"/apis/jobset\.x-k8s\.io/v1alpha2/namespaces/([^/]+)/(jobsets)/([^/]+)(/status)?"), "object"),
    (re.compile(r"/apis/kueue\.x-k8s\.io/v1beta[12]/namespaces/([^/]+)/(localqueues)"), "collection"),
    (re.compile(r"/apis/kueue\.x-k8s\.io/v1beta[12]/namespaces/([^/]+)/(localqueues)/([^/]+)"), "object"),
    (re.compile(r"/apis/kueue\.x-k8s\.io/v1beta[12]()/(clusterqueues|resourceflavors)"), "collection"),
    (re.compile(r"/apis/kueue\.x-k8s\.io/v1beta[12]()/(clusterqueues|resourceflavors)/([^/]+)"), "object"),
]


class KubernetesApi(CustomResources):
    """The API of one cluster, listening until `close()`."""

    def __init__(self, pods: PodRunner, token: str, *, host: str = "127.0.0.1", port: int = 0,
                 tls: tuple[Path, Path] | None = None, node_names: tuple[str, ...] = ("gke-simulated-node",)) -> None:
        super().__init__(pods, node_names)
        self.token, self.host = token, host
        self.break_watches = False  # answer watches with 500, as a broken proxy might
        self.server = _listen(self, host, port, tls)
        self.scheme = "https" if tls else "http"
        self.serving = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True,
                                        name=f"kubernetes-api-{host}")
        self.serving.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.server.server_address[1]}"

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig with the token in it (the launcher's tests; a simulated cluster's
        kubeconfig is the one trainctl's program writes)."""
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "simulated",
            "clusters": [{"name": "simulated", "cluster": {"server": self.url}}],
            "users": [{"name": "simulated", "user": {"token": self.token}}],
            "contexts": [{"name": "simulated", "context": {"cluster": "simulated", "user": "simulated"}}]}))
        return path

    def close(self) -> None:
        """Stop serving and stop every pod's container (the cluster is going away)."""
        with self.cond:
            running = [o for (res, _, _), o in self.objects.items() if res == "pods"
                       and "terminated" not in o["status"]["containerStatuses"][0]["state"]]
            self.closing = True
            self.cond.notify_all()
        self.server.shutdown()
        self.server.server_close()
        for pod in running:
            self.pods.stop(pod, 5.0)
        self.pods.close()
        for thread in self.threads:
            thread.join(timeout=5)

    # -- HTTP --------------------------------------------------------------------------------

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
            if h.headers.get("Authorization") != f"Bearer {self.token}":
                raise KubeError(401, "Unauthorized", "Unauthorized")
            for pattern, kind in ROUTES:
                match = pattern.fullmatch(url.path)
                if match:
                    getattr(self, f"_{kind}")(h, request, method, *match.groups())
                    return
            request.routed = False
            raise KubeError(404, "NotFound", "the server could not find the requested resource")
        except KubeError as exc:
            request.status = exc.body["code"]
            _send(h, exc.body["code"], exc.body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the client went away mid-stream (a watch or log stopped): normal

    def _collection(self, h: BaseHTTPRequestHandler, request: Request, method: str, ns: str,
                    resource: str) -> None:
        if method == "POST" and resource not in ("pods", "events"):
            created = self.create(resource, ns, request.body, request.query)
            request.status = 201
            _send(h, 201, created)
        elif method == "GET" and request.query.get("watch") in ("true", "1"):
            if self.break_watches:
                raise KubeError(500, "InternalError", "the server was told to break watches")
            parse_selector(request.query.get("labelSelector", ""))  # refused before the stream starts
            parse_selector(request.query.get("fieldSelector", ""))
            request.status = 200
            _stream(h, "application/json", self.watch(resource, ns, request.query))
        elif method == "GET":
            with self.cond:
                items = [copy.deepcopy(o) for o in self.select(resource, ns, request.query)]
                rv = str(self.rv)
            for item in items:  # list items carry no kind/apiVersion of their own
                item.pop("kind"), item.pop("apiVersion")
            request.status = 200
            _send(h, 200, {"kind": KINDS[resource][1] + "List", "apiVersion": KINDS[resource][0],
                           "metadata": {"resourceVersion": rv}, "items": items})
        else:
            raise KubeError(405, "MethodNotAllowed", f"{method} is not supported here")

    def _object(self, h: BaseHTTPRequestHandler, request: Request, method: str, ns: str,
                resource: str, name: str, subresource: str | None = None) -> None:
        if method == "GET":
            with self.cond:
                obj = copy.deepcopy(self.get(resource, ns, name))
            request.status = 200
            _send(h, 200, obj)
        elif method == "DELETE" and not subresource:
            options = request.body if isinstance(request.body, dict) else {}
            policy = request.query.get("propagationPolicy") or options.get("propagationPolicy")
            answer = self.delete(resource, ns, name, policy)
            request.status = 200
            _send(h, 200, answer)
        else:
            raise KubeError(405, "MethodNotAllowed", f"{method} is not supported here")

    def _discovery(self, h: BaseHTTPRequestHandler, request: Request, method: str) -> None:
        if method != "GET":
            raise KubeError(405, "MethodNotAllowed", f"{method} is not supported here")
        with self.cond:
            body = self.discovery()
        request.status = 200
        _send(h, 200, body)

    def _log(self, h: BaseHTTPRequestHandler, request: Request, method: str, ns: str, _resource: str,
             name: str) -> None:
        if method != "GET":
            raise KubeError(405, "MethodNotAllowed", f"{method} is not supported here")
        with self.cond:
            pod = self.get("pods", ns, name)
            containers = [c["name"] for c in pod["spec"]["containers"]]
            container = request.query.get("container") or containers[0]
            if container not in containers:
                raise KubeError(400, "BadRequest", f"container {container} is not valid for pod {name}")
            state = pod["status"]["containerStatuses"][0]["state"]
            if "waiting" in state:
                raise KubeError(400, "BadRequest", f'container "{container}" in pod "{name}" is waiting '
                                                   f'to start: {state["waiting"]["reason"]}')
            uid = pod["metadata"]["uid"]
        request.status = 200
        _stream(h, "text/plain", self.log_lines(ns, name, uid, request.query.get("follow") in ("true", "1")))


def _send(h: BaseHTTPRequestHandler, code: int, body: Obj) -> None:
    data = json.dumps(body).encode()
    h.send_response(code)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def _stream(h: BaseHTTPRequestHandler, content_type: str, chunks: Iterator[bytes]) -> None:
    h.send_response(200)
    h.send_header("Content-Type", content_type)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    for chunk in chunks:
        h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        h.wfile.flush()
    h.wfile.write(b"0\r\n\r\n")


def _listen(api: KubernetesApi, host: str, port: int, tls: tuple[Path, Path] | None) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else each small reply waits ~40 ms for a delayed ACK

        def _serve(self) -> None:
            api.handle(self, self.command)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile=str(tls[0]), keyfile=str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    return server
