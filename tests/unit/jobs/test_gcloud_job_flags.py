"""gcloud's own flags on a job's config file, as gcloud users type them: Google's published
config.yaml files carry no pythonModule, packages or args (those are --module-name, --package-path,
--job-dir and the arguments after `--`), and Vertex jobs come as --worker-pool-spec. The package
is built from its parent folder with setuptools and installed with its install_requires; a
requirements.txt beside the code is installed too unless --requirements names another."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from infra.errors import ConfigError
from trainctl.jobs.experiment_file import load_experiment
from trainctl.jobs.gcloud_flags import GcloudFlags
from tests.unit.jobs.test_vertex_packages import DEBIAN_WHEELS, cache  # noqa: F401  (a fixture)

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "tests" / "data" / "cloudml-samples"
TRAINER = REPO / "tests" / "data" / "hypertune-trainer" / "trainer"


@pytest.fixture
def offline(monkeypatch, cache):  # noqa: F811
    """Package builds from Debian's setuptools wheel, nothing fetched."""
    if not any(DEBIAN_WHEELS.glob("setuptools-*.whl")):
        pytest.skip("Debian's setuptools wheel (python3-setuptools-whl) is missing")
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_FIND_LINKS", str(DEBIAN_WHEELS))
    return cache


def plan(path: Path, stack: str = "local", **flags) -> tuple:
    notes: list[str] = []
    code = flags.pop("code", None)
    requirements = flags.pop("requirements", None)
    exp = load_experiment(path, stack=stack, code=code, requirements=requirements, notes=notes,
                          flags=GcloudFlags(**flags))
    return exp, notes


def staged_lines(exp) -> list[str]:
    return [line for line in (exp.code_dir / exp.requirements).read_text().splitlines() if not line.startswith("#")]


def test_a_published_config_yaml_runs_with_gclouds_module_name_job_dir_and_user_args() -> None:
    config = SAMPLES / "cloudml-template" / "template" / "config.yaml"
    with pytest.raises(ConfigError, match="pythonModule is required.*--module-name"):
        plan(config, code=REPO)
    exp, notes = plan(config, code=REPO, module_name="trainers.digits_keras", job_dir="gs://my-bucket/out",
                      region="us-central1", user_args=("--epochs", "4"))
    assert exp.run.command == ("python", "-m", "trainers.digits_keras", "--epochs", "4", "--job-dir", "{job_dir}")
    assert exp.overrides["pools"] == [{"role": "chief", "count": 1}]
    assert any("trainingInput.region 'us-central1'" in n for n in notes)


def test_command_line_flags_override_the_config_file_as_gcloud_does(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"trainingInput": {"scaleTier": "STANDARD_1", "pythonModule": "a.b",
                                                        "args": ["--from-file"]}}))
    exp, _ = plan(config, code=REPO, module_name="trainers.digits_keras", scale_tier="custom",
                  master_machine_type="n1-standard-8", worker_machine_type="n1-standard-4", worker_count=2,
                  user_args=("--from-flags",))
    assert exp.run.command == ("python", "-m", "trainers.digits_keras", "--from-flags")
    assert [(p["role"], p["count"]) for p in exp.overrides["pools"]] == [("chief", 1), ("worker", 2)]


def test_package_path_is_built_with_its_setup_py_and_installed_with_its_install_requires(offline) -> None:
    config = SAMPLES / "census" / "tf-keras" / "hptuning_config.yaml"
    exp, notes = plan(config, module_name="trainer.task", package_path=TRAINER, job_dir="gs://b/census")
    wheel = next(exp.code_dir.glob("*/digits_hypertune_trainer-0.1-py3-none-any.whl"))
    assert staged_lines(exp) == [f"./{wheel.relative_to(exp.code_dir)}"]
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read("digits_hypertune_trainer-0.1.dist-info/METADATA").decode()
        assert "trainer/task.py" in zf.namelist()
    assert "Requires-Dist: cloudml-hypertune" in meta and "Requires-Dist: scikit-learn>=1.4" in meta
    assert exp.run.command[:3] == ("python", "-m", "trainer.task")
    assert any("built into wheels and installed on every node" in n for n in notes)
    assert not list(TRAINER.parent.glob("*.egg-info")) and not (TRAINER.parent / "build").exists()


def test_a_requirements_txt_beside_the_code_is_installed_unless_another_is_named(offline, tmp_path) -> None:
    project = tmp_path / "project"
    shutil.copytree(TRAINER, project / "trainer")
    (project / "requirements.txt").write_text("pandas<2\n")
    (project / "pinned.txt").write_text("pandas==1.5.3\n")
    config = SAMPLES / "cloudml-template" / "template" / "config.yaml"
    exp, notes = plan(config, module_name="trainer.task", package_path=project / "trainer")
    assert staged_lines(exp)[-1] == "pandas<2"  # beside a package without setup.py: a built-in one
    assert any("requirements.txt: installed with the code" in n for n in notes)
    exp, _ = plan(config, module_name="trainer.task", package_path=project / "trainer", requirements="pinned.txt")
    assert staged_lines(exp)[-1] == "pandas==1.5.3" and "pandas<2" not in staged_lines(exp)
    exp, _ = plan(config, module_name="trainer.task", code=project)
    assert exp.requirements == "requirements.txt"  # --code: the folder's own


def test_a_vertex_job_from_gclouds_worker_pool_spec_and_args(tmp_path: Path) -> None:
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump({"scheduling": {"timeout": "3600s"}}))
    exp, notes = plan(config, worker_pool_spec=(
        "machine-type=n1-standard-4,replica-count=1,executor-image-uri=us-docker.pkg.dev/vertex-ai/training/"
        f"pytorch-gpu.2-4.py310:latest,local-package-path={REPO},python-module=trainers.digits_ddp",
        "machine-type=n1-standard-4,replica-count=2,executor-image-uri=us-docker.pkg.dev/vertex-ai/training/"
        f"pytorch-gpu.2-4.py310:latest,local-package-path={REPO},python-module=trainers.digits_ddp"),
        args=("--epochs=4",), requirements="trainers/requirements.txt")
    assert exp.code_dir == REPO and exp.run.framework == "torch" and exp.ttl_hours == 1.0
    assert exp.run.command == ("python", "-m", "trainers.digits_ddp", "--epochs=4")
    assert [(p["role"], p["count"]) for p in exp.overrides["pools"]] == [("chief", 1), ("worker", 2)]
    # the package's requirements name torch 2.13.0: the image's torch 2.4 gives way, as pip's would
    assert any("torch 2.4 is not installed" in n and "torch==2.13.0" in n for n in notes)


@pytest.mark.parametrize("config, flags, message", [
    ({"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                           "pythonPackageSpec": {"executorImageUri": "x", "pythonModule": "m"}}]},
     {"module_name": "trainer.task"}, "--module-name: gcloud ai-platform's flags.*Vertex AI job"),
    ({}, {"worker_pool_spec": ("machine-type=n1-standard-4,replica-count=1,executor-image-uri=x,python-module=m",),
          "user_args": ("--epochs", "3")}, "takes the trainer's arguments as --args"),
    ({}, {"worker_pool_spec": ("machine-type=n1-standard-4,container-image-uri=a,executor-image-uri=b",)},
     "exactly one of executor-image-uri and container-image-uri"),
    ({}, {"worker_pool_spec": ("machine-type=n1-standard-4,replica_count=2,executor-image-uri=b,python-module=m",)},
     "unknown key 'replica_count'"),
    ({"trainingInput": {}}, {"module_name": "m", "scale_tier": "gpu"}, "--scale-tier 'gpu': valid: basic"),
])
def test_flags_that_do_not_fit_are_refused_by_name(tmp_path: Path, config: dict, flags: dict, message: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(config))
    if not config:  # an empty file is no job spec: gcloud ai custom-jobs create's flags make it one
        path.write_text(yaml.safe_dump({"scheduling": {}}))
    with pytest.raises(ConfigError, match=message):
        plan(path, code=REPO, **flags)


def test_a_job_named_as_gcloud_names_it_needs_no_config_file(offline, monkeypatch, tmp_path) -> None:
    """`gcloud ai-platform jobs submit training census_1 --module-name ... --package-path ...`:
    no --config, the job is the flags; trainctl takes the job name where a file would be."""
    monkeypatch.chdir(tmp_path)
    exp, notes = plan(Path("census_20190101_1"), module_name="trainer.task", package_path=TRAINER,
                      scale_tier="BASIC", job_dir="gs://b/census", user_args=("--num-epochs", "2"))
    assert exp.name == "census-20190101-1"
    assert exp.run.command == ("python", "-m", "trainer.task", "--num-epochs", "2", "--job-dir", "{job_dir}")
    with pytest.raises(ConfigError, match="experiment file nope.yaml does not exist"):
        plan(Path("nope.yaml"), module_name="trainer.task")
