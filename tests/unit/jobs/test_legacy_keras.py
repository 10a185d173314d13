"""run.legacy_keras (issue 48): TensorFlow's multi_worker_with_keras tutorial fails under Keras 3
(keras-team/keras#20585); the option adds tf_keras at the TensorFlow minor the requirements pin
and TF_USE_LEGACY_KERAS=1, shown in the plan. Golden style: the plan with the option is the plan
without it, plus exactly these. Without it, requirements that show the failure before launch
warn in the plan, naming the option."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from bootstrap.plan import BootstrapSpec, env_command, plan as bootstrap_plan, requirements_digest
from conftest import trainctl
from infra.errors import ConfigError
from infra.spec.cluster import ClusterSpec
from tests.unit.jobs.test_worker_pools import pooled
from trainctl.jobs.experiment import prepare_run
from trainctl.jobs.experiment_file import load_experiment
from trainctl.jobs.image import ImageSpec, containerfile
from trainctl.jobs.job_environment import requirements_of
from trainctl.jobs.legacy_keras import keras_3_warning, legacy_keras_packages

TF_221 = "tensorflow-cpu==2.21.*\nnumpy>=1.26\n"


def experiment(tmp_path: Path, requirements: str | None = TF_221, nodes: int = 2, **run) -> Path:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "tutorial.py").write_text("print('hi')\n")
    data = {"name": "keras-tutorial", "stack": "local", "overrides": {"nodes": nodes}, "code": "code",
            "run": {"framework": "tensorflow", "command": "python tutorial.py", **run}}
    if requirements is not None:
        (code / "requirements.txt").write_text(requirements)
        data["requirements"] = "requirements.txt"
    path = tmp_path / f"exp-{len(list(tmp_path.glob('exp-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def planned(tmp_path: Path, path: Path):
    notes: list[str] = []
    run = prepare_run(load_experiment(path), "r", tmp_path / "runs", echo=notes.append)
    inventory = pooled(run.spec)
    return run, inventory, run.launcher.dryrun(run.spec, inventory, run.lspec).commands, notes


def exported(command: str, name: str) -> str | None:
    return next((w.split("=", 1)[1] for w in shlex.split(command) if w.startswith(f"{name}=")), None)


def test_legacy_keras_is_the_plain_plan_plus_tf_keras_at_the_pinned_minor_and_the_env(tmp_path) -> None:
    plain, plain_inventory, plain_commands, plain_notes = planned(tmp_path, experiment(tmp_path))
    legacy, inventory, commands, notes = planned(tmp_path, experiment(tmp_path, legacy_keras=True))
    assert legacy.bspec == plain.bspec.model_copy(update={"packages": ("tf_keras==2.21.*",)})
    assert legacy.lspec == plain.lspec.model_copy(update={"env": {"TF_USE_LEGACY_KERAS": "1"}})
    # every node: the same command line, but for the one variable
    assert sorted(commands) == sorted(plain_commands) == ["node0", "node1"]
    for node, command in commands.items():
        assert exported(command, "TF_USE_LEGACY_KERAS") == "1"
        assert exported(plain_commands[node], "TF_USE_LEGACY_KERAS") is None
        assert command.replace("TF_USE_LEGACY_KERAS=1 ", "") == plain_commands[node]
    # the env step installs tf_keras with the requirements, in one resolution, on every node
    for node_plan in bootstrap_plan(inventory, legacy.bspec):
        env = next(s for s in node_plan.steps if s.name == "env")
        assert "-r requirements.txt 'tf_keras==2.21.*'" in env.command
        assert env.fingerprint != next(s for s in bootstrap_plan(plain_inventory, plain.bspec)[0].steps
                                       if s.name == "env").fingerprint
    assert notes == ["[trainctl] note: run.legacy_keras: tf_keras==2.21.* installed beside the requirements on "
                     "every node; TF_USE_LEGACY_KERAS=1 in the job's env (tf.keras is Keras 2); tf_keras depends "
                     "on `tensorflow` itself, which uv installs beside tensorflow-cpu (the same module, a second "
                     "download)"]
    assert [n for n in plain_notes if "note:" in n] == [
        "[trainctl] note: warning: tensorflow-cpu==2.21.* installs TensorFlow 2.21, whose tf.keras is Keras 3: "
        "its model.fit fails under MultiWorkerMirroredStrategy across nodes (keras-team/keras#20585, 'Attempt "
        "to convert a value (PerReplica ...'); set run.legacy_keras: true for tf_keras and TF_USE_LEGACY_KERAS=1, "
        "or train with a custom loop"]


def test_the_users_own_env_and_tf_keras_are_kept(tmp_path) -> None:
    run, *_ = planned(tmp_path, experiment(tmp_path, "tensorflow==2.20.1\ntf-keras==2.20.1\n", legacy_keras=True,
                                           env={"TF_USE_LEGACY_KERAS": "true"}))
    assert run.bspec.packages == ()  # the requirements name tf_keras already
    assert run.lspec.env == {"TF_USE_LEGACY_KERAS": "true"}  # the job's env overrides trainctl's


def test_run_plan_shows_the_option_and_what_it_sets_up(tmp_path) -> None:
    done = trainctl("run", str(experiment(tmp_path, "tensorflow>=2.16\n", legacy_keras=True)), "--plan")
    assert done.returncode == 0, done.stderr
    assert "  legacy_keras: true" in done.stdout
    assert ("# note: run.legacy_keras: tf_keras installed beside the requirements on every node; "
            "TF_USE_LEGACY_KERAS=1 in the job's env (tf.keras is Keras 2)") in done.stdout
    warned = trainctl("run", str(experiment(tmp_path, "tensorflow>=2.16\n")), "--plan")
    assert warned.returncode == 0, warned.stderr
    assert ("# note: warning: tensorflow>=2.16 admits TensorFlow 2.16 or later, whose tf.keras is Keras 3"
            in warned.stdout)
    assert "set run.legacy_keras: true" in warned.stdout


@pytest.mark.parametrize("requirements, expected", [
    ("tensorflow==2.21.0", ("tf_keras==2.21.*",)),
    ("tensorflow-cpu==2.21.*", ("tf_keras==2.21.*",)),
    ("tensorflow~=2.20.0", ("tf_keras==2.20.*",)),
    ("tensorflow[and-cuda]>=2.19,<2.20", ("tf_keras==2.19.*",)),
    ("tensorflow>=2.16", ("tf_keras",)),  # the resolver pairs tf_keras's tensorflow range with it
    ("tensorflow", ("tf_keras",)),
    ("numpy", ("tf_keras",)),
    ("tensorflow==2.21.0\ntf_keras==2.21.0", ()),
    ("tensorflow\nTF-Keras", ()),
])
def test_tf_keras_follows_the_minor_the_requirements_pin(requirements, expected) -> None:
    assert legacy_keras_packages(True, requirements_of(requirements)) == expected
    assert legacy_keras_packages(False, requirements_of(requirements)) == ()


@pytest.mark.parametrize("requirements, nodes, env, warns", [
    ("tensorflow==2.21.0", 2, {}, True),
    ("tensorflow>=2.16", 3, {}, True),
    ("tensorflow  # latest", 2, {}, True),
    ("tensorflow==2.21.0", 1, {}, False),  # one process: no strategy across nodes
    ("tensorflow==2.15.1", 2, {}, False),  # Keras 2 is its tf.keras
    ("tensorflow<2.16", 2, {}, False),
    ("tensorflow==2.21.0\ntf-keras", 2, {}, False),
    ("tensorflow==2.21.0", 2, {"TF_USE_LEGACY_KERAS": "1"}, False),
    ("numpy", 2, {}, False),  # no TensorFlow named: nothing knowable
])
def test_the_keras_3_warning_needs_a_keras_3_tensorflow_and_several_nodes(requirements, nodes, env, warns) -> None:
    warning = keras_3_warning(requirements_of(requirements), env, nodes)
    assert (warning is not None) == warns
    if warning:
        assert "run.legacy_keras: true" in warning and "keras-team/keras#20585" in warning


def test_legacy_keras_is_refused_for_torch_and_for_a_built_image(tmp_path) -> None:
    with pytest.raises(ConfigError, match="legacy_keras sets up tf_keras for TensorFlow's tf.keras; framework torch"):
        load_experiment(experiment(tmp_path, framework="torch", legacy_keras=True))
    path = experiment(tmp_path, legacy_keras=True)
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, "container": {"image": "localhost/trainctl/x:1"}}))
    with pytest.raises(ConfigError, match="container.image localhost/trainctl/x:1 is built already"):
        load_experiment(path)


def test_packages_alone_install_on_nodes_and_in_images(tmp_path) -> None:
    """Without a requirements file, tf_keras (which brings its tensorflow) is still installed."""
    (tmp_path / "code").mkdir()
    alone = BootstrapSpec(code_dir=tmp_path / "code", packages=("tf_keras",))
    node = pooled(ClusterSpec(name="one", nodes=1)).nodes[0]
    assert env_command(node, alone).endswith("pip install -q --python /w/node0/venv/bin/python tf_keras")
    assert requirements_digest(alone, {}) != requirements_digest(alone.model_copy(update={"packages": ()}), {})
    built = containerfile(ImageSpec(name="x", code=alone), "base")
    assert "pip install -q --python /opt/trainctl/venv/bin/python tf_keras\n" in built
    with_file = containerfile(ImageSpec(name="x", code=alone.model_copy(update={"requirements": "r.txt"})), "base")
    assert "-r requirements.txt tf_keras\n" in with_file


def test_the_tutorials_worker_count_misses_the_chief_as_the_docs_say(tmp_path) -> None:
    """docs/how-to/tensorflow.md: on n nodes, node 0 is the chief and the rest workers 0..n-2, so
    the tutorial's len(cluster['worker']) is n - 1; chief + workers counts every replica."""
    run, inventory, commands, _ = planned(tmp_path, experiment(tmp_path, nodes=3))
    configs = [json.loads(exported(commands[n.name], "TF_CONFIG") or "{}") for n in inventory.nodes]
    assert [c["task"] for c in configs] == [{"type": "chief", "index": 0}, {"type": "worker", "index": 0},
                                            {"type": "worker", "index": 1}]
    cluster = configs[1]["cluster"]
    assert cluster == {"chief": ["10.0.0.10:2222"], "worker": ["10.0.0.11:2222", "10.0.0.12:2222"]}
    assert configs[1]["environment"] == "cloud" and all(c["cluster"] == cluster for c in configs)
    per_worker_batch_size = 64
    assert per_worker_batch_size * len(cluster["worker"]) == 128  # the tutorial's: 3 nodes, 2 counted
    assert per_worker_batch_size * (len(cluster.get("chief", [])) + len(cluster["worker"])) == 192
