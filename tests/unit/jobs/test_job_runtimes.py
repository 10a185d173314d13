"""A job's runtime becomes its framework, pinned as Google's image had it: AI Platform's
runtimeVersion (TensorFlow of the same version) and Vertex AI's prebuilt training images
(executorImageUri, a containerSpec.imageUri of Google's). A runtime whose framework has no build
for the nodes' Python is refused by name before anything exists, with the nearest that has one;
a package that requires another version of the framework keeps its own, as pip gives it on
Google's images."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from infra.errors import ConfigError
from infra.spec.stack_config import load_stack
from tests.unit.jobs.test_gcloud_job_flags import REPO, SAMPLES, TRAINER, offline, plan, staged_lines  # noqa: F401
from tests.unit.jobs.test_vertex_packages import cache  # noqa: F401  (a fixture)
from trainctl.jobs.job_environment import node_python

TEMPLATE = SAMPLES / "sklearn" / "sklearn-template" / "template" / "config"


def package(tmp_path: Path, install_requires: list[str]) -> Path:
    project = tmp_path / "project"
    shutil.copytree(TRAINER, project / "trainer")
    (project / "setup.py").write_text("from setuptools import setup\n"
                                      f"setup(name='t', version='0.1', packages=['trainer'], install_requires={install_requires!r})\n")
    return project / "trainer"


def test_the_2019_sklearn_template_is_refused_by_name_with_the_nearest_runtime_that_runs(offline) -> None:
    """runtimeVersion 1.13 / pythonVersion 3.5 (the published config.yaml): TensorFlow 1.13 was built
    for Python up to 3.7. The local stack's nodes run this machine's Python 3.11, for which no
    AI Platform runtime has a build; GCP stacks' nodes run Ubuntu 22.04's Python 3.10."""
    assert node_python(load_stack("local")) == "3.11"
    with pytest.raises(ConfigError, match=r"runtimeVersion 1\.13: it ships tensorflow 1\.13, built for Python 3\.3 "
                                          r"to 3\.7; stack local's nodes run Python 3\.11\. No AI Platform runtime.*"
                                          r"require tensorflow==2\.12\.\*"):
        plan(TEMPLATE / "config.yaml", module_name="trainer.task", package_path=TRAINER)
    with pytest.raises(ConfigError, match=r"Python 3\.10\. The nearest runtime version that runs there: "
                                          r"--runtime-version 2\.8"):
        plan(TEMPLATE / "hptuning_config.yaml", stack="gpu-t4x2", module_name="trainer.task", package_path=TRAINER)


def test_the_runtimes_tensorflow_is_installed_where_it_runs(offline, tmp_path) -> None:
    config = SAMPLES / "cloudml-template" / "template" / "config.yaml"
    exp, notes = plan(config, stack="gpu-t4x2", module_name="trainer.task", package_path=TRAINER,
                      runtime_version="2.11", python_version="3.7")
    assert staged_lines(exp)[-1] == "tensorflow==2.11.*"
    # a package that names the framework's CPU build gets the runtime's version of it
    exp, _ = plan(config, stack="gpu-t4x2", module_name="trainer.task", runtime_version="2.11",
                  package_path=package(tmp_path, ["tensorflow-cpu"]))
    assert staged_lines(exp)[-1] == "tensorflow-cpu==2.11.*"


def test_a_package_that_requires_another_version_keeps_its_own(offline, tmp_path) -> None:
    config = SAMPLES / "cloudml-template" / "template" / "config.yaml"
    exp, notes = plan(config, module_name="trainer.task", runtime_version="2.11",
                      package_path=package(tmp_path, ["tensorflow-cpu>=2.16"]))
    assert not any(line.startswith("tensorflow") for line in staged_lines(exp))
    assert any("runtimeVersion 2.11: its tensorflow 2.11 is not installed: the job requires tensorflow-cpu>=2.16"
               in n for n in notes)


def test_with_code_the_runtimes_framework_is_named_for_the_requirements(tmp_path: Path) -> None:
    config = SAMPLES / "cloudml-template" / "template" / "config.yaml"
    _, notes = plan(config, stack="gpu-t4x2", code=REPO, module_name="trainers.digits_keras", runtime_version="2.10")
    assert any("add tensorflow==2.10.* to it" in n for n in notes)
    exp, notes = plan(config, code=REPO, module_name="trainers.digits_keras", runtime_version="2.10",
                      requirements="trainers/requirements-tf.txt")  # tensorflow-cpu 2.21: the job's own
    assert exp.requirements == "trainers/requirements-tf.txt"


def test_vertex_prebuilt_images_pin_their_framework(tmp_path: Path) -> None:
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1}
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"workerPoolSpecs": [{**pool, "containerSpec": {
        "imageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-14.py310:latest",
        "command": ["python", "-m", "trainer.task"], "args": ["--job-dir", "gs://b/x"]}}]}))
    exp, notes = plan(job, code=TRAINER.parent)
    assert exp.container is None  # Google's image: its framework in the nodes' environment
    assert exp.run.command == ("python", "-m", "trainer.task", "--job-dir", "gs://b/x")
    assert any("add tensorflow==2.14.* to it" in n for n in notes)
    job.write_text(yaml.safe_dump({"workerPoolSpecs": [{**pool, "pythonPackageSpec": {
        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-9.py310:latest",
        "pythonModule": "trainer.task"}}]}))
    with pytest.raises(ConfigError, match=r"executorImageUri .*tf-cpu\.2-9.*Python 3\.7 to 3\.10.*Python 3\.11.*"
                                          r"TensorFlow 2\.12's \(tf-cpu\.2-12\)"):
        plan(job, code=TRAINER.parent)


@pytest.mark.parametrize("runtime, python, message", [
    ("1.14", "3.7", "pythonVersion '3.7' does not go with runtimeVersion 1.14 .*runtime versions 1.15 to 2.11"),
    ("2.11", "3.5", "Python 3.5 goes with runtime versions 1.4 to 1.14"),
    ("2.0", None, "runtimeVersion '2.0' is not an AI Platform runtime version; valid: .*1.15, 2.1"),
    ("1.15", "2.7", "Python 2 programs do not run on the nodes' Python 3"),
])
def test_runtime_and_python_versions_ai_platform_never_offered_are_refused(runtime, python, message) -> None:
    config = SAMPLES / "cloudml-template" / "template" / "config.yaml"
    flags = {"python_version": python} if python else {}
    with pytest.raises(ConfigError, match=message):
        plan(config, code=REPO, module_name="trainers.digits_keras", runtime_version=runtime, **flags)


def test_a_package_whose_own_tensorflow_cannot_run_on_the_nodes_python_is_refused(offline, tmp_path) -> None:
    """The published iris sample's requirements.txt pins tensorflow==1.15.5 (Python 3.7 at most)."""
    project = package(tmp_path, []).parent
    (project / "requirements.txt").write_text("tensorflow==1.15.5\n")
    config = SAMPLES / "tensorflow" / "standard" / "iris" / "hptuning_config.yaml"
    with pytest.raises(ConfigError, match=r"the job requires tensorflow==1\.15\.5: TensorFlow 1\.15 was built for "
                                          r"Python 3\.3 to 3\.7.*nearest release built for it: tensorflow==2\.12\.\*"):
        plan(config, module_name="trainer.task", package_path=project / "trainer", runtime_version="1.13")
