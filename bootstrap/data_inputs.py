"""An experiment's data inputs as data: which gs:// prefix lands where on every node, and the
exact shell line that puts it there, before anything runs.

Staging runs on the node itself, as GCP would have it: the node reads the bucket with the
credentials it has (its service account through the metadata server; on the local stack the
emulator its STORAGE_EMULATOR_HOST names) with google-cloud-storage's transfer manager, in an
environment of its own (`<workdir>/.trainctl/stager`), apart from the job's. The program it
runs is bootstrap/stager/stage.py, sent on the command line (it needs nothing synced).

Every input lands under the node's data folder, `<workdir>/data/<path>`: jobs get that folder
as TRAINCTL_DATA_DIR. It is outside the code folder, which bootstrap's rsync keeps identical to
the controller's (and would empty of anything else).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from bootstrap.plan import UV_INSTALLER, BootstrapSpec, node_paths
from bootstrap.ssh import shell_env
from infra.providers.inventory import Inventory, Node
from infra.spec.cluster_sections import bucket_name_problems

STAGER_DIR = Path(__file__).with_name("stager")
STAGER_PROGRAM = STAGER_DIR / "stage.py"
STAGER_REQUIREMENTS = STAGER_DIR / "requirements.txt"
DATA_DIR_ENV = "TRAINCTL_DATA_DIR"


class DataInput(BaseModel):
    """`{source: gs://bucket/prefix/, path: name}`: the objects under the prefix, copied to
    `<data dir>/name` on every node (`mode: stage`), or mounted there read-only with Cloud
    Storage FUSE where the node has gcsfuse (`mode: mount`; nodes without it stage)."""

    # Fields are described by the docstrings under them, as infra.spec.model.SpecModel's are.
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    """A Cloud Storage prefix, `gs://<bucket>/<prefix>`."""
    path: str
    """Where the objects land, relative to the nodes' data dir ($TRAINCTL_DATA_DIR)."""
    mode: Literal["stage", "mount"] = "stage"
    """`stage` copies the objects; `mount` mounts them read-only with Cloud Storage FUSE where the
    node has gcsfuse (nodes without it stage)."""

    @field_validator("source")
    @classmethod
    def gcs_uri(cls, v: str) -> str:
        if not v.startswith("gs://"):
            raise ValueError(f"source {v!r} must be a Cloud Storage URI, gs://<bucket>/<prefix>")
        bucket = v[len("gs://"):].split("/", 1)[0]
        problems = bucket_name_problems(bucket)
        if problems:
            raise ValueError(f"source {v!r}: bucket name {bucket!r} {'; '.join(problems)}")
        return v

    @field_validator("path")
    @classmethod
    def inside_data_dir(cls, v: str) -> str:
        path = PurePosixPath(v)
        if not v.strip() or path.is_absolute() or ".." in path.parts or str(path) == ".":
            raise ValueError(f"path {v!r} must be a relative folder name inside the node's data folder "
                             f"(${DATA_DIR_ENV}), e.g. 'digits' (no leading '/', no '..')")
        return str(path)

    @property
    def bucket(self) -> str:
        return self.source[len("gs://"):].split("/", 1)[0]

    @property
    def prefix(self) -> str:
        """The folder the source names: gs://b/digits is gs://b/digits/ (never digits2/)."""
        prefix = self.source[len("gs://"):].partition("/")[2]
        return prefix if not prefix or prefix.endswith("/") else prefix + "/"


def overlapping(inputs: tuple[DataInput, ...]) -> str | None:
    """Two inputs whose folders are the same or one inside the other: they would overwrite each
    other's files (and journals)."""
    paths = [PurePosixPath(i.path) for i in inputs]
    for i, a in enumerate(paths):
        for b in paths[i + 1:]:
            if a == b or a in b.parents or b in a.parents:
                return f"data paths {str(a)!r} and {str(b)!r} overlap; give each input a folder of its own"
    return None


def data_dir(node: Node) -> str:
    return f"{node_paths(node)['workdir']}/data"


def stager_spec() -> BootstrapSpec:
    """The stager's environment as bootstrap seeds one: offline nodes install it from the uv
    cache the controller fills with it."""
    return BootstrapSpec(code_dir=STAGER_DIR, requirements=STAGER_REQUIREMENTS.name, python="python3")


def stager_requirements() -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in STAGER_REQUIREMENTS.read_text().splitlines())
    return [line for line in lines if line]


def entries(node: Node, inputs: tuple[DataInput, ...]) -> list[dict[str, object]]:
    root = data_dir(node)
    return [{"source": i.source, "dest": f"{root}/{i.path}", "mount": i.mode == "mount"} for i in inputs]


def stage_command(inventory: Inventory, node: Node, inputs: tuple[DataInput, ...]) -> str:
    """The node's whole staging: its stager environment where missing, then the program."""
    venv = f"{node_paths(node)['state']}/stager"
    python = shlex.quote(f"{venv}/bin/python")
    env = [
        'UV="$(command -v uv || echo "$HOME/.local/bin/uv")"',
        f'[ -x "$UV" ] || {{ curl -LsSf {UV_INSTALLER} | sh && UV="$HOME/.local/bin/uv"; }}',
        f'[ -x {python} ] || "$UV" venv -q --python python3 {shlex.quote(venv)}',
        f'"$UV" pip install -q --python {python} ' + " ".join(shlex.quote(r) for r in stager_requirements()),
    ]
    program = [f"{venv}/bin/python", "-c", STAGER_PROGRAM.read_text(),
               json.dumps(entries(node, inputs), separators=(",", ":"))]
    return shell_env(inventory.node_env) + " && ".join(env) + " && " + " ".join(shlex.quote(a) for a in program)

