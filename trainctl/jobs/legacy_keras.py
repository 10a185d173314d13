"""Keras 3 and a tf.distribute strategy: TensorFlow 2.16 and later install Keras 3 as `tf.keras`,
whose `model.fit` under MultiWorkerMirroredStrategy fails (`ValueError: Attempt to convert a
value (PerReplica: ...`, keras-team/keras#20585), as TensorFlow's own multi_worker_with_keras
tutorial does. Legacy Keras (Keras 2) is the `tf_keras` package, which `tf.keras` becomes with
TF_USE_LEGACY_KERAS=1 (Keras' "What about Keras 2?" notes for TF 2.16).

`run.legacy_keras` sets both up: tf_keras beside the requirements on every node and
TF_USE_LEGACY_KERAS=1 in the job's environment. tf_keras X.Y pins `tensorflow>=X.Y,<X.(Y+1)`
(keras-team/tf-keras, oss_setup.py), so it is asked for at the minor the requirements pin
TensorFlow to, or unpinned for the resolver to pair with the TensorFlow it picks.

Where the requirements show the Keras 3 case before launch (a TensorFlow that may be 2.16 or
later, no tf_keras, several nodes), the plan says so; it is not refused, since custom training
loops (trainers/digits_keras.py) run under Keras 3."""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from trainctl.jobs.job_environment import requirements_of

# The distributions that install the `tensorflow` module.
TF_DISTRIBUTIONS = frozenset({"tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
                              "tensorflow-macos", "tensorflow-aarch64"})
TF_KERAS = "tf-keras"
LEGACY_ENV = "TF_USE_LEGACY_KERAS"
KERAS_3_FROM = (2, 16)
# The minors a specifier is probed at: 2.x's releases and a margin past the newest.
_PROBES = [Version(f"2.{minor}.{patch}") for minor in range(0, 60) for patch in range(0, 10)]


def read_requirements(code_dir: Path, requirements: str | None) -> list[Requirement]:
    path = code_dir / requirements if requirements else None
    return requirements_of(path.read_text()) if path is not None and path.is_file() else []


def named(requirements: list[Requirement], names: frozenset[str] | set[str]) -> Requirement | None:
    return next((r for r in requirements if canonicalize_name(r.name) in names), None)


def tensorflow_minors(requirement: Requirement) -> list[tuple[int, int]]:
    """The 2.x minors the requirement's specifier admits (all of them when it has none)."""
    return sorted({(v.major, v.minor) for v in _PROBES if requirement.specifier.contains(v, prereleases=True)})


def tf_keras_requirement(requirements: list[Requirement]) -> str:
    """tf_keras at the one minor the requirements pin TensorFlow to; else unpinned, for the
    resolver to pick the tf_keras whose `tensorflow` range meets the requirements'."""
    tf = named(requirements, TF_DISTRIBUTIONS)
    minors = tensorflow_minors(tf) if tf is not None else []
    if len(minors) == 1:
        return f"tf_keras=={minors[0][0]}.{minors[0][1]}.*"
    return "tf_keras"


def legacy_keras_packages(legacy_keras: bool, requirements: list[Requirement]) -> tuple[str, ...]:
    """What `run.legacy_keras` adds to the nodes' requirements: tf_keras, unless they name it."""
    if not legacy_keras or named(requirements, {TF_KERAS}) is not None:
        return ()
    return (tf_keras_requirement(requirements),)


def legacy_keras_env(legacy_keras: bool) -> dict[str, str]:
    return {LEGACY_ENV: "1"} if legacy_keras else {}


def legacy_keras_note(packages: tuple[str, ...], requirements: list[Requirement]) -> str:
    """What the plan says `run.legacy_keras` does."""
    installs = (f"{packages[0]} installed beside the requirements on every node" if packages
                else "tf_keras from the requirements")
    note = f"run.legacy_keras: {installs}; {LEGACY_ENV}=1 in the job's env (tf.keras is Keras 2)"
    tf = named(requirements, TF_DISTRIBUTIONS)
    if packages and tf is not None and canonicalize_name(tf.name) != "tensorflow":
        note += (f"; tf_keras depends on `tensorflow` itself, which uv installs beside {tf.name} "
                 "(the same module, a second download)")
    return note


def keras_3_warning(requirements: list[Requirement], env: dict[str, str], nodes: int) -> str | None:
    """The plan's warning where the requirements admit a TensorFlow with Keras 3 as tf.keras
    (2.16 and later), name no tf_keras, and several nodes train: `model.fit` under the
    strategy TF_CONFIG makes will fail (custom training loops do not)."""
    tf = named(requirements, TF_DISTRIBUTIONS)
    if nodes < 2 or tf is None or named(requirements, {TF_KERAS}) is not None or env.get(LEGACY_ENV):
        return None
    keras_3 = [m for m in tensorflow_minors(tf) if m >= KERAS_3_FROM]
    if not keras_3:
        return None
    first = f"{keras_3[0][0]}.{keras_3[0][1]}"
    which = f"installs TensorFlow {first}" if len(keras_3) == 1 else f"admits TensorFlow {first} or later"
    return (f"warning: {tf} {which}, whose tf.keras is Keras 3: its model.fit fails under MultiWorkerMirroredStrategy across nodes (keras-team/keras#20585, "
            "'Attempt to convert a value (PerReplica ...'); set run.legacy_keras: true for tf_keras and "
            f"{LEGACY_ENV}=1, or train with a custom loop")
