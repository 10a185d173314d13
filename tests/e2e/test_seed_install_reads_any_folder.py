"""The controller's seed install (the uv cache offline nodes link from, bootstrap.uv_cache) runs
as the uid that owns the nodes' cache, not root: it must still read the user's code where users
keep it, in `/tmp`, in root's home and in any folder only root may enter (`mktemp -d` makes
0700 folders), also when the path goes through a symlink."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest

from bootstrap.plan import BootstrapSpec, seed_dir
from bootstrap.uv_cache import fill_uv_cache

pytestmark = pytest.mark.e2e  # the install switches to the cache owner's uid: needs root

NODE_UID = 65534  # a simulated VM's login user is not root


def _wheel(folder: Path) -> Path:
    """A one-module wheel, so the install has a file of the user's to read and nothing to fetch."""
    files = {"tinypkg/__init__.py": b"ANSWER = 42\n",
             "tinypkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
             "tinypkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
                     for name, data in files.items()) + "tinypkg-0.1.dist-info/RECORD,,\n"
    path = folder / "wheels" / "tinypkg-0.1-py3-none-any.whl"
    path.parent.mkdir()
    with zipfile.ZipFile(path, "w") as whl:
        for name, data in files.items():
            whl.writestr(name, data)
        whl.writestr("tinypkg-0.1.dist-info/RECORD", record)
    return path


@pytest.fixture
def node_cache():
    """A cache folder owned by the nodes' uid, where the controller fills it."""
    home = Path(tempfile.mkdtemp(prefix="trainctl-node-home-"))
    home.chmod(0o755)
    (home / "uv-cache").mkdir()
    for path in (home, home / "uv-cache"):
        os.chown(path, NODE_UID, NODE_UID)
    yield home / "uv-cache"
    shutil.rmtree(home)


@pytest.fixture(params=["tmp", "home", "symlink"])
def code_folder(request):
    """The user's code in a 0700 folder in /tmp, in root's home, or reached through a symlink."""
    made = [Path(tempfile.mkdtemp(prefix="trainctl-code-",
                                  dir=str(Path.home()) if request.param != "tmp" else None))]
    code = made[0]
    _wheel(code)
    (code / "requirements.txt").write_text("./wheels/tinypkg-0.1-py3-none-any.whl\n")
    if request.param == "symlink":
        link = Path(tempfile.mkdtemp(prefix="trainctl-link-")) / "project"
        link.symlink_to(code)
        made.append(link.parent)
        code = link
    assert oct(made[0].stat().st_mode & 0o777) == "0o700"
    yield code
    for path in made:
        shutil.rmtree(path)


def test_the_seed_install_reads_code_only_root_may_enter(node_cache, code_folder, tmp_path):
    node_env = {"UV_CACHE_DIR": str(node_cache), "UV_NO_INDEX": "1"}
    spec = BootstrapSpec(code_dir=code_folder, requirements="requirements.txt")
    code, output = fill_uv_cache(node_env, spec, tmp_path / "prefetch.log")
    assert code == 0, output
    seed_python = seed_dir(node_env, spec) / "bin" / "python"
    imported = subprocess.run([str(seed_python), "-c", "import tinypkg; print(tinypkg.ANSWER)"],
                              capture_output=True, text=True)
    assert imported.stdout.strip() == "42", imported.stderr
    # filled as the nodes' uid, so they can hardlink from it
    assert {p.stat().st_uid for p in node_cache.rglob("*")} == {NODE_UID}
