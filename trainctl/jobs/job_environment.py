"""A job spec's environment on the nodes: its code (a source folder, or its packages built into
wheels as gcloud builds and AI Platform / Vertex install them), its requirements, and the
framework its runtime ships (AI Platform's runtimeVersion, Vertex's prebuilt images;
infra/spec/job_runtimes.py), pinned as Google's image had it.

A runtime's framework is preinstalled on Google's machines, so a package that requires it
unpinned gets the runtime's version, and one whose requirement excludes that version gets its
own (pip replaces the preinstalled one): the pins here follow the same rule. What cannot run on
the nodes' Python is refused before anything exists, naming the nearest version that can.
"""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from infra.spec import catalog
from infra.providers import realizers
from infra.errors import ConfigError
from infra.spec.job_runtimes import (AI_PLATFORM_RUNTIMES, FRAMEWORK_DISTRIBUTIONS, TENSORFLOW_PYTHONS, FrameworkPin,
                                ai_platform_runtime, nearest_runtime, nearest_tensorflow, prebuilt_image, runs_on)
from infra.spec.cluster import ClusterSpec
from trainctl.jobs.gcloud_flags import GcloudFlags

REQUIREMENTS_TXT = "requirements.txt"


@dataclass(frozen=True)
class Sources:
    """Where the user's code comes from, as given on the command line."""

    code: Path | None = None  # --code: a source folder, synced as it is
    requirements: str | None = None  # --requirements, relative to the code folder
    package_path: Path | None = None  # --package-path / local-package-path=: built with setuptools
    archives: tuple[Path, ...] = ()  # local --packages / extra-packages=
    plan: bool = False  # `run --plan`: nothing fetched or built, what that leaves unknown said


def sources_of(job: dict[str, Any], flags: GcloudFlags, code: Path | None, requirements: str | None,
               plan: bool = False) -> Sources:
    """Where the code comes from: --code, gcloud's --package-path and local --packages, or a
    --worker-pool-spec's local-package-path (taken out of the job: it is gcloud's, not Vertex's)."""
    archives = [Path(p) for p in flags.packages if not p.startswith("gs://")]
    spec = job.get("trialJobSpec") or job.get("jobSpec") or job
    local = [pool.pop("local") for pool in spec.get("workerPoolSpecs") or [] if pool and "local" in pool]
    folders = {entry.get("local-package-path") for entry in local} - {None}
    if len(folders) > 1:
        raise ConfigError(f"--worker-pool-spec: local-package-path differs between pools ({', '.join(sorted(folders))}); "
                          "trainctl gives a job one code folder")
    for entry in local:
        if entry.get("requirements"):
            raise ConfigError(f"--worker-pool-spec requirements={entry['requirements']}: put them in "
                              "requirements.txt in local-package-path (gcloud documents the same effect)")
        if entry.get("script"):
            raise ConfigError(f"--worker-pool-spec script={entry['script']}: give python-module= (the script's "
                              "module) instead")
        archives += [Path(next(iter(folders), ".")) / p for p in entry.get("extra-packages", [])]
    for archive in archives:
        if not archive.is_file():
            raise ConfigError(f"--packages: {archive} is not a file (a package archive: .tar.gz, .zip, .whl)")
    if folders and code:
        raise ConfigError("--code and local-package-path= both name the code: give one")
    return Sources(code=code or (Path(next(iter(folders))) if folders else None), requirements=requirements,
                   package_path=flags.package_path, archives=tuple(archives), plan=plan)


def runtime_pins(job: dict[str, Any], notes: list[str]) -> list[FrameworkPin]:
    """The frameworks the job's runtime ships: AI Platform's runtimeVersion, or the Google
    prebuilt images its pools name (one environment per job: they must agree)."""
    if "trainingInput" in job:
        ti = job["trainingInput"] or {}
        runtime, python = ti.get("runtimeVersion"), ti.get("pythonVersion")
        if python and str(python).startswith("2."):
            raise ConfigError(f"trainingInput.pythonVersion {python}: Python 2 programs do not run on the nodes' "
                              "Python 3; use pythonVersion 3.7 (runtime versions 1.15 and later)")
        if not runtime:
            if not (ti.get("masterConfig") or {}).get("imageUri"):
                notes.append("no runtimeVersion (gcloud requires --runtime-version or --master-image-uri): the "
                             "environment is the package's own dependencies, no framework pinned")
            return []
        try:
            return [ai_platform_runtime(str(runtime), str(python) if python else None)]
        except ValueError as exc:
            raise ConfigError(f"trainingInput.{exc}") from None
    spec = job.get("trialJobSpec") or job.get("jobSpec") or job
    pins: dict[str, FrameworkPin] = {}
    for i, pool in enumerate(spec.get("workerPoolSpecs") or []):
        for field, image in ((f"workerPoolSpecs[{i}].pythonPackageSpec.executorImageUri",
                              ((pool or {}).get("pythonPackageSpec") or {}).get("executorImageUri")),
                             (f"workerPoolSpecs[{i}].containerSpec.imageUri",
                              ((pool or {}).get("containerSpec") or {}).get("imageUri"))):
            pin = prebuilt_image(image, field) if image else None
            if pin is None:
                if image and field.endswith("executorImageUri"):
                    notes.append(f"{field} {image} is not one of Google's prebuilt training images: no "
                                 "framework pinned; the environment is the package's own dependencies")
                continue
            other = pins.setdefault(pin.package, pin)
            if other.version != pin.version:
                raise ConfigError(f"{field}: {pin.package} {pin.version}, and {other.source} has {other.version}; "
                                  "trainctl gives a job one environment: name one version in every pool")
    return list(pins.values())


def reconcile(pins: list[FrameworkPin], requirements: list[Requirement], notes: list[str]) -> list[FrameworkPin]:
    """The pins still to install once the job's own requirements are in: a requirement that
    excludes the runtime's version wins (as pip would replace the preinstalled framework); one
    that allows it gets the runtime's, under the distribution the job names (tensorflow-cpu)."""
    kept = []
    for pin in pins:
        names = FRAMEWORK_DISTRIBUTIONS.get(pin.package, (pin.package,))
        mine = [r for r in requirements if canonicalize_name(r.name) in names]
        excluding = [r for r in mine if not _allows(r, pin.version)]
        if excluding:
            notes.append(f"{pin.source}: its {pin.package} {pin.version} is not installed: the job requires "
                         f"{excluding[0]} (which replaces a preinstalled framework, as pip does on Google's images)")
            continue
        kept.append(FrameworkPin(canonicalize_name(mine[0].name), pin.version, pin.source) if mine else pin)
    return kept


def _allows(requirement: Requirement, version: str) -> bool:
    """Whether the requirement admits some release of `version` (major.minor)."""
    return any(requirement.specifier.contains(f"{version}.{patch}", prereleases=True) for patch in range(100))


def check_python(pins: list[FrameworkPin], python: str | None, stack: str) -> None:
    """Refuses a framework with no build for the nodes' Python, naming the nearest that has."""
    for pin in pins:
        if python is None or runs_on(pin, python) is not False:
            continue
        low, high = pin.pythons or ("?", "?")
        problem = (f"{pin.source}: it ships {pin.package} {pin.version}, built for Python {low} to {high}; "
                   f"stack {stack}'s nodes run Python {python}")
        nearest = nearest_tensorflow(pin.version, python)
        if pin.source.startswith("runtimeVersion"):
            runtime = nearest_runtime(pin, python)
            if runtime:
                raise ConfigError(f"{problem}. The nearest runtime version that runs there: --runtime-version {runtime} "
                                  f"(TensorFlow {runtime})")
            last = list(AI_PLATFORM_RUNTIMES)[-1]
            raise ConfigError(f"{problem}. No AI Platform runtime version runs there (the last, {last}, ships "
                              f"TensorFlow {last}): leave runtimeVersion out and require tensorflow=={nearest}.* "
                              f"(the nearest release built for Python {python}) in the package's install_requires "
                              "or requirements.txt")
        raise ConfigError(f"{problem}. The nearest prebuilt image that runs there is TensorFlow {nearest}'s "
                          f"(tf-cpu.{nearest.replace('.', '-') if nearest else '?'}), or require "
                          f"tensorflow=={nearest}.* in the package")


def check_requirements(requirements: list[Requirement], python: str | None, stack: str) -> None:
    """Refuses a job whose own TensorFlow requirement allows no release built for the nodes'
    Python (a 2019 package pinning tensorflow 1.15), naming the nearest release that is."""
    names = FRAMEWORK_DISTRIBUTIONS["tensorflow"]
    for req in requirements:
        if python is None or canonicalize_name(req.name) not in names or not req.specifier:
            continue
        allowed = [v for v in TENSORFLOW_PYTHONS if _allows(req, v)]
        if allowed and not any(runs_on(FrameworkPin("tensorflow", v, ""), python) for v in allowed):
            low, high = TENSORFLOW_PYTHONS[allowed[-1]]
            raise ConfigError(f"the job requires {req}: TensorFlow {allowed[-1]} was built for Python {low} to {high}, "
                              f"and stack {stack}'s nodes run Python {python}; the nearest release built for it: "
                              f"tensorflow=={nearest_tensorflow(allowed[-1], python)}.*")


def node_python(spec: ClusterSpec) -> str | None:
    """X.Y of the Python the stack's nodes run jobs with: the boot image's on GCP VMs (catalog),
    this machine's for local nodes (they share its /usr); None where trainctl cannot know (TPU
    runtimes, GKE pods, an image of your own)."""
    if not spec.runs_on_vms or spec.image:
        return None
    if realizers.capabilities(spec).machine_types:
        return catalog.IMAGE_PYTHON.get(catalog.IMAGE_GPU_DEFAULT if spec.gpu else catalog.IMAGE_CPU_DEFAULT)
    from bootstrap.plan import NODE_PATH

    exe = shutil.which(spec.python, path=NODE_PATH)
    if exe is None:
        return None
    done = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True)
    return done.stdout.strip() or None


def requirements_of(text: str) -> list[Requirement]:
    """The named requirements of a requirements file (options, paths and URLs left out)."""
    out = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-", ".", "/")):
            continue
        try:
            out.append(Requirement(line))
        except InvalidRequirement:
            continue  # a path or URL form pip takes that is not a name
    return out


def wheel_requirements(wheel: Path) -> list[Requirement]:
    """A wheel's Requires-Dist (its install_requires), extras' left out."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(zf.read(name).decode())
    reqs = [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
    return [r for r in reqs if not (r.marker and "extra" in str(r.marker))]


def build_package(package_path: Path) -> Path:
    """--package-path as gcloud builds it: with setuptools, its parent folder as the context,
    the parent's setup.py / pyproject.toml if it has one, else a minimal one naming the
    package. Built from a copy of the context (setuptools writes build/ and *.egg-info where it
    builds); the wheel lands in a temporary folder the caller removes after staging."""
    from trainctl.jobs.packages import _packages_root, _uv

    package_path = package_path.resolve()
    if not (package_path / "__init__.py").is_file():
        raise ConfigError(f"--package-path {package_path}: not a Python package (a folder with __init__.py)")
    out = Path(tempfile.mkdtemp(prefix="package-", dir=_packages_root()))
    context = out / "context"
    skip = shutil.ignore_patterns(".git", "__pycache__", "build", "dist", "*.egg-info", ".venv")
    if any((package_path.parent / f).is_file() for f in ("setup.py", "pyproject.toml")):
        shutil.copytree(package_path.parent, context, ignore=skip, symlinks=True)
    else:
        shutil.copytree(package_path, context / package_path.name, ignore=skip, symlinks=True)
        (context / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
            f'[project]\nname = "{package_path.name}"\nversion = "0.0.0"\n'
            f'[tool.setuptools]\npackages = ["{package_path.name}"]\n')
    done = subprocess.run([_uv(), "build", "--wheel", "--out-dir", str(out / "dist"), str(context)],
                          capture_output=True, text=True)
    wheels = list((out / "dist").glob("*.whl"))
    if done.returncode or not wheels:
        shutil.rmtree(out, ignore_errors=True)
        raise ConfigError(f"--package-path {package_path}: {package_path.parent} does not build into a wheel "
                          f"with setuptools: {build_failure(done.stderr)}")
    return wheels[0]


def build_failure(stderr: str) -> str:
    """The build backend's own reason (its exception's line) before uv's summary of it."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    reasons = [line for line in lines if not line.startswith((" ", "Traceback", "error:", "hint:", "Building"))]
    return reasons[-1].strip() if reasons else stderr.strip()[-2000:]


def package_uris(job: dict[str, Any]) -> list[str]:
    """Every pool's packageUris, once each (trainctl has one environment per job)."""
    if "trainingInput" in job:
        return list((job["trainingInput"] or {}).get("packageUris") or [])
    spec = job.get("trialJobSpec") or job.get("jobSpec") or job
    uris = [uri for pool in spec.get("workerPoolSpecs") or [] if pool
            for uri in (pool.get("pythonPackageSpec") or {}).get("packageUris") or []]
    return list(dict.fromkeys(uris))


def code_and_requirements(job: dict[str, Any], *, path: Path, target: ClusterSpec, sources: Sources,
                          notes: list[str]) -> tuple[Path, str | None]:
    """The trainer's code and requirements file: --code as it is (the package's source), else
    the job's packages (packageUris, --package-path, --packages) built into wheels and staged
    with the runtime's framework pins (trainctl.jobs.packages), else the spec's folder."""
    pins = runtime_pins(job, notes)
    python = node_python(target)
    wanted = ((job.get("trainingInput") or {}).get("pythonVersion"))
    if wanted and python and str(wanted) != python:
        notes.append(f"trainingInput.pythonVersion {wanted}: stack {target.name}'s nodes run Python {python}")
    uris = package_uris(job)
    staged = bool(uris or sources.package_path or sources.archives)
    if sources.code or not staged:
        return _source_folder(job, path, target, sources, pins, python, notes)
    if sources.plan:
        return _planned_packages(uris, path, target, sources, notes)
    from trainctl.jobs.packages import REQUIREMENTS, stage

    context = sources.package_path.resolve().parent if sources.package_path else path.parent
    extra = _requirements_file(context, sources.requirements, notes, beside=bool(sources.package_path))

    def environment(wheels: list[Path]) -> list[str]:
        mine = [r for w in wheels for r in wheel_requirements(w)] + requirements_of(extra.read_text() if extra else "")
        kept = reconcile(pins, mine, notes)
        check_python(kept, python, target.name)
        check_requirements(mine, python, target.name)
        return [p.requirement for p in kept]

    built = build_package(sources.package_path) if sources.package_path else None
    try:
        folder = stage(uris, reaches_google=realizers.capabilities(target).reaches_google, requirements=extra,
                       archives=(*(((built, f"--package-path {sources.package_path}"),) if built else ()),
                                 *((a, f"--packages {a}") for a in sources.archives)),
                       pins=tuple(p.requirement for p in pins), environment=environment)
    finally:
        if built:
            shutil.rmtree(built.parent.parent, ignore_errors=True)
    what = [*uris, *([str(sources.package_path)] if sources.package_path else []), *map(str, sources.archives)]
    notes.append(f"packages {what}: fetched, built into wheels and installed on every node ({folder}) with "
                 "their dependencies; the job runs from there")
    return folder, REQUIREMENTS


def _planned_packages(uris: list[str], path: Path, target: ClusterSpec, sources: Sources,
                      notes: list[str]) -> tuple[Path, str | None]:
    """`run --plan` of a job with packages: their URIs checked as written and the local stack's
    reach checked, nothing fetched or built (a plan answers at once, unreachable buckets too);
    what only the packages can tell is said instead."""
    from trainctl.jobs.packages import check_reach, check_uris

    if uris:
        check_uris(uris)
        check_reach(realizers.capabilities(target).reaches_google)
    what = [*uris, *([f"--package-path {sources.package_path}"] if sources.package_path else []),
            *(f"--packages {a}" for a in sources.archives)]
    notes.append(f"packages not fetched in a plan: {', '.join(what)}; a run fetches them, builds them into wheels "
                 "and installs them on every node with their dependencies (their requirements, framework pins "
                 f"and Python are checked then); code: above is the spec's folder, standing in for them")
    return path.parent.resolve(), None


def _source_folder(job: dict[str, Any], path: Path, target: ClusterSpec, sources: Sources,
                   pins: list[FrameworkPin], python: str | None, notes: list[str]) -> tuple[Path, str | None]:
    code = (sources.code or path.parent).resolve()
    if package_uris(job):
        notes.append(f"packageUris {package_uris(job)} are not fetched: the code comes from --code (the "
                     "package's source), synced to every node")
    extra = _requirements_file(code, sources.requirements, notes, beside=sources.code is not None)
    mine = requirements_of(extra.read_text() if extra else "")
    kept = reconcile(pins, mine, notes)
    check_python(kept, python, target.name)
    check_requirements(mine, python, target.name)
    if kept:
        notes.append(f"{', '.join(p.source for p in kept)}: with --code the environment is the requirements file; "
                     f"add {', '.join(p.requirement for p in kept)} to it for the runtime's framework")
    return code, sources.requirements or (REQUIREMENTS_TXT if extra else None)


def _requirements_file(folder: Path, given: str | None, notes: list[str], beside: bool) -> Path | None:
    """--requirements (relative to the code folder), else a requirements.txt beside the code."""
    if given:
        path = (folder / given).resolve()
        if not path.is_file():
            raise ConfigError(f"--requirements: {path} does not exist")
        return path
    if beside and (folder / REQUIREMENTS_TXT).is_file():
        notes.append(f"{folder / REQUIREMENTS_TXT}: installed with the code (give --requirements FILE for another)")
        return folder / REQUIREMENTS_TXT
    return None
