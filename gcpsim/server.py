"""The simulator's HTTP front end: Google's REST APIs on one loopback address.

A request is routed by the discovery documents (discovery.py), checked as Google's front end
checks it (validation.py), refused where its project does not exist or has not enabled the API
(403 SERVICE_DISABLED, as every Google API answers), and then answered by the handler an API
module registered for the method's id (`@handles("compute.instances.insert")`), inside one
transaction on the world document (state.py). Methods nobody registered answer 501, naming
the method: the simulator models what trainctl and its program call, and says where it stops.

Paths under /trainctl-sim/v1/ are the simulator's own (what Google has no API for: preempting
a VM on request, a stockout switched on, the environment a simulated node offers).

Hand-written over a web framework on purpose: routing comes from the discovery documents, and
the standard library's threading server is all the transport that needs.
"""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gcpsim import discovery, validation
from gcpsim.errors import ApiError, not_found, service_disabled, unimplemented
from gcpsim.machines import ApiOnly, MachineBackend
from gcpsim.routes import (ADMIN, ADMIN_PREFIX, ALIVE, CLAIMS, GUARDS, HANDLERS,
                                                  PUBLIC_PROJECTS, RAW, STARTS, STOPS, Call, Raw, project_in)
from gcpsim.state import Store, World


JOURNAL_ENV = "TRAINCTL_SIM_JOURNAL"


def _load_api_modules() -> None:
    """Each module registers its handlers and tickers when imported."""
    from gcpsim import apis  # noqa: F401


class Simulator:
    """The simulated cloud whose state lives in `home`, served on loopback while running."""

    def __init__(self, home: Path, backend: MachineBackend | None = None) -> None:
        _load_api_modules()
        self.store = Store(home)
        self.home = home
        self.backend: MachineBackend = backend or ApiOnly()
        self.store.backend = self.backend  # tickers and completions act through it too
        self.router = discovery.router()
        self._servers: list[ThreadingHTTPServer] = []
        self.url = ""
        self.last_request = time.time()
        # Every API request answered, one JSON line each (what a provider or client called, in
        # order): set TRAINCTL_SIM_JOURNAL to a file to keep it.
        journal = os.environ.get(JOURNAL_ENV)
        self.journal = Path(journal) if journal else None
        self._journal_lock = threading.Lock()
        self.busy = _InFlight()
        self.stop_requested = threading.Event()

    # -- serving ----------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on host:port (0: any free port); returns the URL the controller uses."""
        server = self._listen(host, port)
        self.url = f"http://{host}:{server.server_address[1]}"
        for resume in STARTS:
            resume(self)
        return self.url

    def start_also(self, host: str, port: int) -> None:
        """A further listener (the service address simulated machines reach)."""
        self._listen(host, port)

    def _listen(self, host: str, port: int) -> ThreadingHTTPServer:
        sim = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Keep-alive clients (every google-cloud library) otherwise wait out Nagle against
            # delayed ACKs: ~40-60 ms a call instead of a few (measured on get_bucket).
            disable_nagle_algorithm = True

            def _serve(self) -> None:
                sim.last_request = time.time()
                if not self.path.startswith(ADMIN_PREFIX + "stop-if-idle"):
                    # a caller is here: an earlier caller's request to stop is void
                    sim.stop_requested.clear()
                with sim.busy:
                    self._answer()
                sim.last_request = time.time()

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, headers, body = sim.handle(self.command, self.path, raw,
                                                   {k.lower(): v for k, v in self.headers.items()})
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = _Server((host, port), Handler)
        server.daemon_threads = True
        # a short poll: stop() waits for it (0.5 s by default, per simulator a test starts)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         name=f"gcp-simulator-{host}", daemon=True).start()
        self._servers.append(server)
        return server

    def stop(self) -> None:
        """Stops serving; what the API modules run beside the simulator (the storage emulator)
        stops with it. The world stays on disk."""
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()
        for stop_service in STOPS:
            stop_service(self.home)

    def has_machines(self) -> bool:
        """Whether a simulated machine or network exists (the service must stay up for it)."""
        alive = getattr(self.backend, "alive", None)
        return (bool(alive()) if alive else False) or any(up(self.home) for up in ALIVE)

    # -- dispatch ---------------------------------------------------------------------------

    def handle(self, verb: str, target: str, raw: bytes, headers: dict[str, str]
               ) -> tuple[int, dict[str, str], bytes]:
        split = urlsplit(target)
        query = parse_qs(split.query, keep_blank_values=True)
        legacy = True
        try:
            if split.path.startswith(ADMIN_PREFIX):
                return _json(200, self._admin(verb, split.path, raw))
            for answer_raw in RAW:
                answer = answer_raw(self, verb, target, raw, headers)
                if answer is not None:
                    return answer
            routes = self.router.match(verb, split.path)
            if not routes:
                raise ApiError(404, f"The requested URL {split.path} was not found on this server.")
            route = self._choose(routes)
            legacy = route.method.api.legacy_errors
            query = validation.camel_query(route.method, query)
            validation.check_query(route.method, query)
            body = self._body(route.method, raw, headers)
            with self.store.transaction() as world:
                self._admit(world, route, query)
                handler = HANDLERS.get(route.method.id)
                if handler is None:
                    raise unimplemented(route.method.id)
                call = Call(self, world, route.method, route.params, query, body, raw, headers, time.time())
                for check in GUARDS:
                    check(call)
                result = handler(call)
            self._log(verb, target, route.method.id, raw, 200)
            if isinstance(result, Raw):
                return result.status, {"Content-Type": result.content_type, **result.headers}, result.body
            return _json(200, {} if result is None else result)
        except ApiError as exc:
            self._log(verb, target, None, raw, exc.code)
            return _json(exc.code, exc.body(legacy))

    def _log(self, verb: str, target: str, method_id: str | None, raw: bytes, status: int) -> None:
        if self.journal is None:
            return
        line = json.dumps({"verb": verb, "target": target, "method": method_id, "status": status,
                           "body": raw.decode("utf-8", "replace") if raw else None})
        with self._journal_lock, open(self.journal, "a") as out:
            out.write(line + "\n")

    def _choose(self, routes: list[discovery.Route]) -> discovery.Route:
        handled = [r for r in routes if r.method.id in HANDLERS] or routes
        if len(handled) > 1:
            with self.store.transaction() as world:
                claimed = [r for r in handled if CLAIMS.get(r.method.id, lambda w, p: False)(world, r.params)]
            handled = claimed or handled
        return handled[0]

    def _body(self, method: discovery.Method, raw: bytes, headers: dict[str, str]) -> Any:
        if not raw or not headers.get("content-type", "application/json").startswith("application/json"):
            return validation.check_body(method, None) if method.request and not raw else None
        try:
            body = json.loads(raw)
        except ValueError:
            raise ApiError(400, "Invalid JSON payload received. Unexpected token.") from None
        return validation.check_body(method, body)

    def _admit(self, world: World, route: discovery.Route, query: dict[str, list[str]]) -> None:
        """The project must exist and have enabled the API (Service Usage itself is on in
        every project)."""
        project_id = project_in(route.params, query)
        if project_id is None:
            return  # bucket- or object-scoped storage calls: their handlers find the project
        project = world.project(project_id)
        api = route.method.api
        if project is None and route.method.id.startswith(PUBLIC_PROJECTS.get(project_id, ("-",))):
            return
        if project is None:
            if api.legacy_errors:
                raise not_found(f"projects/{project_id}")
            raise ApiError(403, f"Permission denied on resource project {project_id}.", details=[{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "CONSUMER_INVALID",
                "domain": "googleapis.com", "metadata": {"consumer": f"projects/{project_id}",
                                                        "service": api.service}}])
        if project["services"].get(api.service) != "ENABLED":
            raise service_disabled(api.service, project["number"], api.doc.get("title", api.service))

    def _admin(self, verb: str, path: str, raw: bytes) -> Any:
        body = json.loads(raw) if raw else None
        for want, pattern, fn in ADMIN:
            m = pattern.match(path)
            if m and want == verb:
                return fn(self, m, body)
        raise ApiError(404, f"no simulator endpoint {verb} {path}")


class _InFlight:
    """How many requests are being answered (a shutdown waits for none)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        with self._lock:
            self.count += 1

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self.count -= 1


class _Server(ThreadingHTTPServer):
    # socketserver's listen backlog is 5: an engine creating 64 VMs at once (each resource its
    # own connection) had connections reset.
    request_queue_size = 256


def _json(status: int, doc: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json; charset=UTF-8"}, json.dumps(doc).encode()
