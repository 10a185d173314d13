"""Code sync that costs the controller one pass over the tree, whatever the node count.

rsync compares the whole tree with every destination: for 8 nodes that is 8 file-list scans
and 8 checksum passes on the controller. Here rsync's own filter engine (`--list-only`, the
same .gitignore and exclude rules) lists the tree once; the listing is kept under its digest, and
what each node needs is derived from the digest the node reports it holds:
  - an earlier listing we still have: one archive of only the changed files plus the deletions,
    built once and unpacked on every node (no per-node scan of the tree);
  - a fresh node, or a listing we no longer have: plain rsync. For a whole tree rsync's receiver
    was measured faster than `tar -x` here (bench/bootstrap_speed.py), and it is always correct.
"""

from __future__ import annotations

import io
import shlex
import subprocess
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path

MAX_DELETIONS_INLINE = 2000


@dataclass(frozen=True)
class Entry:
    kind: str  # "-" file, "d" directory, "l" symlink
    size: str
    mtime: str


def list_tree(src: Path, filters: list[str]) -> str:
    argv = ["rsync", "-a", "--list-only", *filters, str(src.resolve()) + "/"]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def parse(listing: str) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    for line in listing.splitlines():
        parts = line.split(None, 4)
        if len(parts) < 5 or parts[4] == ".":
            continue
        name = parts[4]
        if parts[0].startswith("l"):
            name = name.split(" -> ", 1)[0]
        entries[name] = Entry(parts[0][0], parts[1], f"{parts[2]} {parts[3]}")
    return entries


def changes(old: dict[str, Entry], new: dict[str, Entry]) -> tuple[list[str], list[str]]:
    """(paths to send, paths to delete). Directories are sent only when new (not recursively)."""
    send = [p for p, e in new.items()
            if p not in old or (e.kind != "d" and e != old[p]) or old[p].kind != e.kind]
    gone = [p for p in old if p not in new]
    # Deleting a directory deletes what is under it: keep only the top-most deletions.
    gone_dirs = {p for p in gone if old[p].kind == "d"}
    gone = [p for p in gone if not any(p.startswith(d + "/") for d in gone_dirs)]
    return sorted(send), sorted(gone)


def archive(src: Path, paths: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for path in paths:
            tar.add(src / path, arcname=path, recursive=False)
    return buf.getvalue()


def unpack_command(code_dir: str, deletions: list[str]) -> str:
    q = shlex.quote(code_dir)
    remove = ""
    if deletions:
        remove = " && rm -rf -- " + " ".join(shlex.quote(p) for p in deletions)
    return f"cd {q} && tar -xzf - --no-same-owner{remove}"


class TreeCache:
    """Listings by digest on the controller, and the archives built from them in this run."""

    def __init__(self, directory: Path, src: Path) -> None:
        self.directory = directory
        self.src = src
        self.lock = threading.Lock()
        self.archives: dict[tuple[str | None, str], tuple[bytes, list[str]] | None] = {}

    def save(self, digest: str, listing: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{digest}.list"
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.write_text(listing)
            tmp.replace(path)

    def load(self, digest: str) -> dict[str, Entry] | None:
        path = self.directory / f"{digest}.list"
        return parse(path.read_text()) if path.exists() else None

    def payload(self, have: str | None, want: str, listing: str) -> tuple[bytes, list[str]] | None:
        """The archive and deletions taking a node from `have` to `want`; None: use rsync."""
        key = (have, want)
        with self.lock:  # built once, shared by every node in the same state
            if key not in self.archives:
                self.archives[key] = self._build(have, listing)
            return self.archives[key]

    def _build(self, have: str | None, listing: str) -> tuple[bytes, list[str]] | None:
        new = parse(listing)
        old = self.load(have) if have else None
        if old is None:
            return None
        send, gone = changes(old, new)
        if len(gone) > MAX_DELETIONS_INLINE:
            return None
        return archive(self.src, send), gone
