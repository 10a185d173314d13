"""Cloud Storage objects: served by a gcp-storage-emulator process behind the simulator.

The simulator answers buckets itself (storage.py: global names, IAM, labels, lifecycle) and
hands every object request (list, get, media and multipart and resumable uploads, downloads,
deletes, batches) to one gcp-storage-emulator per simulator home, on loopback, with its data on
disk under the home, so objects outlive the processes as the world does. It is started on the
first object request, recorded in <home>/storage/emulator.json (pid, port) and found there by
any other process serving the home; `stop_emulator` (run when the simulator stops) ends it, and
it ends with the process that started it in any case (a killed test run leaves none behind):
another process that was using it starts the next one, on the same data, when it stops answering.

Requests are forwarded as they came, Host header included, so the URLs the emulator writes into
its answers (resumable session `Location`, `mediaLink`) point at the simulator's address as the
client used it: a VM reaches the simulator at its service address, the controller on loopback.
The emulator stores an object's links as they were at its upload, so they are rewritten to the
reading request's address (an object the controller uploaded is downloadable by a VM).
Hand-written over an HTTP proxy library on purpose: it is one request forwarded with
http.client, and no proxy library on PyPI is smaller than that.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

from gcpsim.errors import ApiError
from gcpsim.routes import STOPS

START_TIMEOUT_SECONDS = 20.0
FORWARD_TIMEOUT_SECONDS = 300.0
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate", "content-length"}
ANSWER_HEADERS = {"content-type", "location", "range", "content-range", "etag", "accept-ranges",
                  "content-disposition", "content-encoding", "content-language", "cache-control",
                  "last-modified"}
_lock = threading.Lock()
_known: dict[Path, str] = {}  # home -> emulator URL, as this process last found it
# Emulators are started from this one thread, which lives as long as the process: the kernel's
# parent-death signal follows the thread that forked, and request threads come and go.
_launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage-emulator-launcher")
PR_SET_PDEATHSIG = 1


def _dir(home: Path) -> Path:
    return home / "storage"


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    _dir(home).mkdir(parents=True, exist_ok=True)
    with _lock, open(_dir(home) / "emulator.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _record(home: Path) -> dict[str, int] | None:
    try:
        return json.loads((_dir(home) / "emulator.json").read_text())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _healthy(url: str) -> bool:
    try:
        status, _, body = forward(url, "GET", "/", b"", {}, timeout=2.0)
    except OSError:
        return False
    return status == 200 and body.strip() == b"OK"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(home: Path) -> str:
    data = _dir(home) / "data"
    data.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    with open(_dir(home) / "emulator.log", "ab") as log:
        argv = [sys.executable, "-m", "gcp_storage_emulator", "-d", str(data), "start", "--host", "127.0.0.1",
                "--port", str(port), "--quiet"]
        process = _launcher.submit(subprocess.Popen, argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   start_new_session=True, preexec_fn=_die_with_parent).result()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not _healthy(url):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise ApiError(503, f"the simulator's storage emulator did not start (see {_dir(home) / 'emulator.log'})")
        time.sleep(0.05)
    (_dir(home) / "emulator.json").write_text(json.dumps({"pid": process.pid, "port": port}))
    return url


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def emulator_url(home: Path) -> str:
    """The home's emulator, started if none answers (as this process last found it: `proxy`
    asks again when it stops answering)."""
    if home in _known:
        return _known[home]
    with _locked(home):
        record = _record(home)
        url = f"http://127.0.0.1:{record['port']}" if record else ""
        if not (record and _alive(record["pid"]) and _healthy(url)):
            if record and _alive(record["pid"]):
                os.kill(record["pid"], signal.SIGKILL)  # alive but not answering
            url = _start(home)
        _known[home] = url
        return url


def stop_emulator(home: Path) -> None:
    """Ends the home's emulator (its data stays on disk); nothing if none runs."""
    with _locked(home):
        record = _record(home)
        _known.pop(home, None)
        if record and _alive(record["pid"]):
            os.kill(record["pid"], signal.SIGTERM)
            deadline = time.monotonic() + 5
            while _alive(record["pid"]) and time.monotonic() < deadline:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(record["pid"], os.WNOHANG)
                time.sleep(0.02)
        (_dir(home) / "emulator.json").unlink(missing_ok=True)


def forward(url: str, verb: str, target: str, body: bytes, headers: dict[str, str],
            timeout: float = FORWARD_TIMEOUT_SECONDS) -> tuple[int, dict[str, str], bytes]:
    """One request to the emulator, answered as (status, the headers a client needs, body)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    try:
        sent = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}
        connection.request(verb, target, body=body or None, headers=sent)
        response = connection.getresponse()
        answer = response.read()
        kept = {k: v for k, v in response.getheaders() if k.lower() in ANSWER_HEADERS}
        return response.status, kept, answer
    finally:
        connection.close()


def _ensure_bucket(url: str, bucket: str) -> None:
    """The emulator holds objects only in buckets it knows: made there (again) before each
    request, since another process may have deleted and made the world's bucket meanwhile."""
    status, _, answer = forward(url, "POST", "/storage/v1/b", json.dumps({"name": bucket}).encode(),
                                {"Content-Type": "application/json"})
    if status not in (200, 409):
        raise ApiError(500, f"storage emulator refused bucket {bucket}: {answer[:200]!r}")


def proxy(home: Path, bucket: str | None, verb: str, target: str, body: bytes,
          headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """An object request answered by the home's emulator (started, or started again if the
    one this process knew is gone)."""
    for attempt in (1, 2):
        url = emulator_url(home)
        try:
            if bucket is not None:
                _ensure_bucket(url, bucket)
            status, kept, answer = forward(url, verb, target, body, headers)
            return status, kept, _links_at(answer, kept, headers.get("host"))
        except ConnectionError:
            _known.pop(home, None)
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _links_at(answer: bytes, headers: dict[str, str], host: str | None) -> bytes:
    """Object resources' mediaLink and selfLink at the address this request came to, as Google's
    name its own host: the emulator keeps the address an object was uploaded through, which a
    reader elsewhere (a VM at the service address, the controller on loopback) cannot reach."""
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    if not host or not content_type.startswith("application/json"):
        return answer
    try:
        document = json.loads(answer)
    except ValueError:
        return answer
    for item in [document, *document.get("items", [])] if isinstance(document, dict) else []:
        for key in ("mediaLink", "selfLink"):
            parts = urllib.parse.urlsplit(item[key]) if isinstance(item.get(key), str) else None
            if parts is not None and parts.netloc:  # a path alone already goes where the reader went
                item[key] = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return json.dumps(document).encode()


def holds_objects(home: Path, bucket: str) -> bool:
    if not (_dir(home) / "data").exists():
        return False  # nothing was ever stored in this home
    status, _, answer = proxy(home, None, "GET", f"/storage/v1/b/{urllib.parse.quote(bucket)}/o?maxResults=1", b"", {})
    return status == 200 and bool(json.loads(answer or b"{}").get("items"))


def forget_bucket(home: Path, bucket: str) -> None:
    """Removes the (empty) bucket from the emulator too, so a bucket made again starts empty."""
    if not (_dir(home) / "data").exists():
        return
    proxy(home, None, "DELETE", f"/storage/v1/b/{urllib.parse.quote(bucket)}", b"", {})


STOPS.append(stop_emulator)
