"""gcloud's own job flags as options of `trainctl run`, with gcloud's meaning: a job spec runs
here with the flags it is submitted to Google with. trainctl/jobs/gcloud_flags.py reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer


def _gcloud(flag: str, help: str) -> Any:
    """One of gcloud's job flags, in a help panel of their own."""
    return typer.Option(flag, help=f"job specs, as gcloud: {help}", rich_help_panel="gcloud's flags (job specs)")


# gcloud ai-platform jobs submit training
ModuleName = Annotated[Optional[str], _gcloud("--module-name", "the trainer's module (python -m)")]
PackagePath = Annotated[Optional[Path], _gcloud(
    "--package-path", "the trainer's package, built from its parent folder (its setup.py) and "
                      "installed with its dependencies")]
Packages = Annotated[Optional[list[str]], _gcloud("--packages", "more package archives (paths or gs://), "
                                                                "comma-separated")]
JobDir = Annotated[Optional[str], _gcloud("--job-dir", "passed to the trainer as --job-dir (here: the "
                                                       "stack's bucket)")]
RuntimeVersion = Annotated[Optional[str], _gcloud("--runtime-version", "AI Platform runtime: its "
                                                                       "TensorFlow is installed")]
PythonVersion = Annotated[Optional[str], _gcloud("--python-version", "checked against the runtime")]
ScaleTier = Annotated[Optional[str], _gcloud("--scale-tier", "basic, standard-1, premium-1, custom")]
MasterMachineType = Annotated[Optional[str], _gcloud("--master-machine-type", "masterType")]
WorkerMachineType = Annotated[Optional[str], _gcloud("--worker-machine-type", "workerType")]
WorkerCount = Annotated[Optional[int], _gcloud("--worker-count", "workerCount")]
ParameterServerMachineType = Annotated[Optional[str], _gcloud("--parameter-server-machine-type",
                                                              "parameterServerType")]
ParameterServerCount = Annotated[Optional[int], _gcloud("--parameter-server-count", "parameterServerCount")]
MasterImageUri = Annotated[Optional[str], _gcloud("--master-image-uri", "a custom container")]
Region = Annotated[Optional[str], _gcloud("--region", "noted (the stack decides where)")]
# gcloud ai custom-jobs create
WorkerPoolSpec = Annotated[Optional[list[str]], _gcloud(
    "--worker-pool-spec", "Vertex: machine-type=...,replica-count=...,executor-image-uri=...,"
                          "python-module=...,local-package-path=... (once per pool)")]
Args = Annotated[Optional[list[str]], _gcloud("--args", "Vertex: the trainer's arguments, comma-separated")]
PythonPackageUris = Annotated[Optional[list[str]], _gcloud("--python-package-uris",
                                                           "Vertex: package archives in gs://")]
DisplayName = Annotated[Optional[str], _gcloud("--display-name", "Vertex: the job's name")]
