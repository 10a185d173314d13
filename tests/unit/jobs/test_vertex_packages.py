"""A Vertex job's `packageUris`, taken as written: the controller fetches the packages from gs://
(through gcsfs, here from a GCS emulator on loopback that STORAGE_EMULATOR_HOST names, as gcsfs
itself reads it), builds source distributions into wheels once, and hands bootstrap a code folder
whose requirements install them. Nothing here leaves the machine: builds use Debian's setuptools
wheel, offline."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest
import yaml

from infra.errors import ConfigError
from trainctl.jobs.experiment_file import load_experiment
from trainctl.jobs.packages import stage
from conftest import free_port, TEST_HOMES

DEBIAN_WHEELS = Path("/usr/share/python-wheels")  # python3-setuptools-whl, with python3-venv
UV = str(Path(__file__).resolve().parents[3] / ".venv" / "bin" / "uv")


@pytest.fixture
def cache(monkeypatch):
    """A private TRAINCTL_CACHE (where staged packages are kept)."""
    path = TEST_HOMES / f"cache-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("TRAINCTL_CACHE", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def gcs(monkeypatch, cache):
    """A GCS emulator on loopback with the bucket `my-bucket`, and gcsfs pointed at it."""
    from gcp_storage_emulator.server import create_server

    if not any(DEBIAN_WHEELS.glob("setuptools-*.whl")):
        pytest.skip("Debian's setuptools wheel (python3-setuptools-whl) is missing")
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_FIND_LINKS", str(DEBIAN_WHEELS))
    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket="my-bucket")
    server.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # read at import; see trainctl.jobs.collect
    import gcsfs

    yield gcsfs.GCSFileSystem(token="anon")
    server.stop()


def build_sdist(src: Path, name: str, packages: list[str], dependencies: list[str] | None = None) -> Path:
    """`src` as a package the way AI Platform's docs make one (`python setup.py sdist`), here
    with uv, offline, against Debian's setuptools wheel."""
    (src / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "{name}"
        version = "0.1"
        dependencies = {json.dumps(dependencies or [])}
        [tool.setuptools]
        packages = {json.dumps(packages)}
        """))
    subprocess.run([UV, "build", "-q", "--sdist", "--out-dir", str(src / "dist"), str(src)], check=True,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(src), "UV_OFFLINE": "1",
                        "UV_FIND_LINKS": str(DEBIAN_WHEELS)})
    return src / "dist" / f"{name}-0.1.tar.gz"


def sdist(tmp_path: Path, message: str) -> Path:
    src = tmp_path / f"src-{message}"
    (src / "trainer").mkdir(parents=True)
    (src / "trainer" / "__init__.py").write_text("")
    (src / "trainer" / "task.py").write_text(f"print({message!r})\n")
    return build_sdist(src, "trainer", ["trainer"])


# An executor image of the user's own: no framework of Google's to pin, the package alone.
OWN_EXECUTOR = "us-central1-docker.pkg.dev/my-project/training/trainer-base:1"


def job_spec(tmp_path: Path, uris: list[str], executor: str = OWN_EXECUTOR) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
        "pythonPackageSpec": {"executorImageUri": executor,
                              "packageUris": uris, "pythonModule": "trainer.task", "args": []}}]}))
    return path


def run_module(folder: Path, tmp_path: Path) -> str:
    """Install the folder's requirements as a node does (from the folder, offline) and run the
    job's module."""
    venv = tmp_path / f"venv-{folder.name}"
    subprocess.run([UV, "venv", "-q", str(venv)], check=True)
    subprocess.run([UV, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "-r", "requirements.txt"],
                   cwd=folder, check=True)
    return subprocess.run([str(venv / "bin" / "python"), "-m", "trainer.task"], cwd=tmp_path,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_package_uris_are_fetched_built_into_wheels_and_installed_as_the_job_runs(gcs, tmp_path) -> None:
    gcs.put(str(sdist(tmp_path, "first")), "my-bucket/pkgs/trainer-0.1.tar.gz")
    notes: list[str] = []
    exp = load_experiment(job_spec(tmp_path, ["gs://my-bucket/pkgs/trainer-0.1.tar.gz"]), stack="local", notes=notes)
    folder = exp.code_dir
    assert exp.requirements == "requirements.txt" and exp.run.command == ("python", "-m", "trainer.task")
    lines = (folder / "requirements.txt").read_text().splitlines()
    assert lines[0] == "# gs://my-bucket/pkgs/trainer-0.1.tar.gz"
    assert sorted(p.name for p in folder.rglob("*")) == [  # all of it synced: no .gitignore
        folder.joinpath(lines[1]).parent.name, "requirements.txt", "trainer-0.1-py3-none-any.whl"]
    assert [l for l in lines if not l.startswith("#")] == [
        f"./{p.relative_to(folder)}" for p in folder.glob("*/trainer-0.1-py3-none-any.whl")]
    assert run_module(folder, tmp_path) == "first"
    assert any("fetched, built into wheels" in n for n in notes)
    assert any(OWN_EXECUTOR in n and "no framework pinned" in n for n in notes)


def test_the_same_packages_give_the_same_folder_and_a_rebuilt_one_a_new_wheel_path(gcs, tmp_path) -> None:
    uri = "gs://my-bucket/trainer-0.1.tar.gz"
    gcs.put(str(sdist(tmp_path, "first")), uri)
    first = stage([uri], reaches_google=False)
    assert stage([uri], reaches_google=False) == first  # nothing built again
    gcs.put(str(sdist(tmp_path, "second")), uri)  # same name and version, new content
    second = stage([uri], reaches_google=False)
    wheel = [l for l in (second / "requirements.txt").read_text().splitlines() if l.startswith("./")]
    assert second != first and wheel != [l for l in (first / "requirements.txt").read_text().splitlines()
                                         if l.startswith("./")]
    # a node with the first installed gets the second: uv reinstalls a wheel from a new path
    assert run_module(second, tmp_path) == "second"


def test_wheels_and_the_users_requirements_are_installed_together(gcs, tmp_path) -> None:
    built = tmp_path / "wheel"
    subprocess.run([UV, "build", "-q", "--wheel", "--out-dir", str(built), str(sdist(tmp_path, "w"))], check=True)
    wheel = next(built.glob("*.whl"))
    gcs.put(str(wheel), f"my-bucket/{wheel.name}")
    extra = tmp_path / "requirements-extra.txt"
    extra.write_text("numpy>=1.26\n")
    folder = stage([f"gs://my-bucket/{wheel.name}"], reaches_google=True, requirements=extra)
    lines = (folder / "requirements.txt").read_text().splitlines()
    assert lines[-1] == "numpy>=1.26" and any(l.endswith(f"/{wheel.name}") for l in lines)


def test_missing_and_malformed_packages_are_refused_by_uri_before_anything_exists(gcs, cache, tmp_path) -> None:
    with pytest.raises(ConfigError, match="gs://my-bucket/nope-0.1.tar.gz does not exist"):
        stage(["gs://my-bucket/nope-0.1.tar.gz"], reaches_google=False)
    with pytest.raises(ConfigError, match="not a Python package"):
        stage(["gs://my-bucket/trainer.py"], reaches_google=False)
    with pytest.raises(ConfigError, match="not a gs://bucket/path URI"):
        stage(["https://example.com/trainer-0.1.tar.gz"], reaches_google=False)
    broken, content = tmp_path / "broken-0.1.tar.gz", tmp_path / "broken-0.1"
    content.mkdir()
    (content / "README").write_text("no pyproject.toml, no setup.py\n")
    subprocess.run(["tar", "czf", str(broken), "-C", str(tmp_path), content.name], check=True)
    gcs.put(str(broken), "my-bucket/broken-0.1.tar.gz")
    with pytest.raises(ConfigError, match="does not build into a wheel"):
        stage(["gs://my-bucket/broken-0.1.tar.gz"], reaches_google=False)
    assert not list((cache / "packages").iterdir())  # no half-staged folder


def test_the_local_stack_reads_packages_from_this_machine_only(monkeypatch, cache, tmp_path) -> None:
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    spec = job_spec(tmp_path, ["gs://my-bucket/trainer-0.1.tar.gz"])
    with pytest.raises(ConfigError, match="does not reach Google Cloud Storage.*--code"):
        load_experiment(spec, stack="local")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://10.1.2.3:9023")
    with pytest.raises(ConfigError, match="this machine only"):
        load_experiment(spec, stack="local")
    # --code: the package's source instead, said in the notes; nothing fetched
    notes: list[str] = []
    exp = load_experiment(spec, stack="local", code=tmp_path, notes=notes)
    assert exp.code_dir == tmp_path.resolve() and any("not fetched" in n for n in notes)


def test_on_a_stack_whose_pods_run_images_the_package_is_built_into_one(gcs, tmp_path) -> None:
    gcs.put(str(sdist(tmp_path, "gke")), "my-bucket/trainer-0.1.tar.gz")
    notes: list[str] = []
    exp = load_experiment(job_spec(tmp_path, ["gs://my-bucket/trainer-0.1.tar.gz"]), stack="gke-l4", notes=notes)
    assert exp.container is not None and exp.container.image is None  # built from the staged wheels
    assert exp.requirements == "requirements.txt"
    assert any("builds one from the code" in n for n in notes)


def test_a_plan_fetches_no_package_and_says_what_it_cannot_know(monkeypatch, cache, tmp_path) -> None:
    """`run --plan` against a GCP stack with packages no one can reach: no connection is opened
    (any would fail here), no gcsfs (None in sys.modules makes any import of it fail), the
    packages named as unfetched."""
    import socket
    import sys

    def no_network(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a plan opened a network connection")

    monkeypatch.setitem(sys.modules, "gcsfs", None)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    uris = ["gs://no-such-bucket-anywhere/trainer-0.1.tar.gz", "gs://no-such-bucket-anywhere/extra-0.2.whl"]
    notes: list[str] = []
    exp = load_experiment(job_spec(tmp_path, uris), stack="gpu-t4x2", notes=notes, plan=True)
    assert exp.run.command == ("python", "-m", "trainer.task") and exp.requirements is None
    said = [n for n in notes if n.startswith("packages not fetched in a plan")]
    assert said and all(uri in said[0] for uri in uris), notes
    assert not (cache / "packages").exists() or not list((cache / "packages").iterdir())
    # what a plan can check without the network it still refuses
    with pytest.raises(ConfigError, match="not a Python package"):
        load_experiment(job_spec(tmp_path, ["gs://b/trainer.py"]), stack="gpu-t4x2", plan=True)
    with pytest.raises(ConfigError, match="does not reach Google Cloud Storage"):
        load_experiment(job_spec(tmp_path, uris), stack="local", plan=True)


def test_codes_help_names_the_packages_as_its_default() -> None:
    from typer.testing import CliRunner

    from trainctl.cli.entry import app

    shown = " ".join(CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "400"}).output.split())
    assert "default: the job's packages" in shown and "(default: the spec's folder)" not in shown
