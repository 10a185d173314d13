"""The CLI on a real local stack, as a user or a CI job runs it: results on stdout and progress on
stderr, errors a user can act on, runs kept in the project, `exec` where jobs run, and files the
program leaves on the chief collected before teardown."""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from conftest import leftovers, run_id_of, trainctl

pytestmark = pytest.mark.e2e


def project(tmp_path: Path, stack: str, **config) -> Path:
    """A trainctl project (Pulumi.yaml + stacks/) with one local stack file."""
    root = tmp_path / "project"
    (root / "stacks").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text("name: project\nruntime: python\n")
    (root / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": {
        "trainctl:provider": "local", "trainctl:nodes": 1, **{f"trainctl:{k}": v for k, v in config.items()}}}))
    return root


def ok(*args: str, cwd: Path) -> tuple[str, str]:
    done = trainctl(*args, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, done.stderr


@contextlib.contextmanager
def stack_up(root: Path, stack: str) -> Iterator[None]:
    """The project's stack, up for the block and removed after it, whatever the block does."""
    ok("up", "--stack", stack, cwd=root)
    try:
        yield
    finally:
        ok("down", "--stack", stack, cwd=root)


def code_folder(tmp_path: Path, **files: str) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    for name, text in files.items():
        (code / name.replace("_", ".")).write_text(text)
    return code


def test_ls_status_and_reap_print_results_on_stdout_and_progress_on_stderr(trainctl_home, tmp_path):
    root = project(tmp_path, "cliout", ttl_hours=0.0005)  # expires 1.8 s after it is up
    ok("up", "--stack", "cliout", cwd=root)
    listed, _ = ok("ls", cwd=root)
    assert re.search(r"│ cliout\s+│ local\s+│ 1 ", listed), listed
    status, status_err = ok("status", "--stack", "cliout", cwd=root)
    assert re.search(r"│ node0\s+│ 0\s+│ 10\.210\.\d+\.\d+\s+│ cpu\s+│ ok \(\d+ ms\)", status), status
    assert status_err == ""
    time.sleep(2)
    reaped, progress = ok("reap", cwd=root)
    assert reaped == "cliout removed\n"
    assert "stack cliout expired" in progress
    assert leftovers("cliout") == []
    listed, hint = ok("ls", cwd=root)
    assert listed == "" and "No stack is up" in hint  # nothing listed: stdout stays empty


def test_down_says_once_that_the_stack_is_removed(trainctl_home, tmp_path):
    root = project(tmp_path, "downonce")
    ok("up", "--stack", "downonce", cwd=root)
    out, err = ok("down", "--stack", "downonce", cwd=root)
    assert (out + err).count("stack downonce removed") == 1, out + err
    assert leftovers("downonce") == []


def test_runs_are_kept_in_the_project_whatever_the_working_directory(trainctl_home, tmp_path):
    root = project(tmp_path, "runsroot")
    elsewhere = root / "src" / "deep"
    elsewhere.mkdir(parents=True)
    with stack_up(root, "runsroot"):
        ok("exec", "--stack", "runsroot", "--", "true", cwd=elsewhere)
    assert (root / "runs" / "stack-runsroot" / "exec" / "node0.log").is_file()
    assert not (elsewhere / "runs").exists()


def test_exec_runs_in_the_code_folder_with_the_nodes_environment(trainctl_home, tmp_path):
    root = project(tmp_path, "execwhere")
    code = code_folder(tmp_path, marker_txt="here\n")
    with stack_up(root, "execwhere"):
        ok("bootstrap", "--stack", "execwhere", "--code", str(code), cwd=root)
        out, err = ok("exec", "--stack", "execwhere", "--",
                      "python -c 'import os, sys; print(sys.prefix); print(os.getcwd())' && cat marker.txt", cwd=root)
    lines = [line.removeprefix("[node0] ") for line in out.splitlines()]
    venv, cwd, marker = lines
    assert venv.endswith("/venv") and cwd.endswith("/code") and marker == "here"
    assert Path(venv).parent == Path(cwd).parent  # the node's own venv, beside its code folder
    assert "node0: exit 0" in err


def test_bootstrap_refuses_a_code_folder_that_is_missing_or_a_file(trainctl_home, tmp_path):
    root = project(tmp_path, "badcode")
    with stack_up(root, "badcode"):
        missing = trainctl("bootstrap", "--stack", "badcode", "--code", "nosuchdir", cwd=root)
        a_file = trainctl("bootstrap", "--stack", "badcode", "--code", "Pulumi.yaml", cwd=root)
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr == "error: --code nosuchdir does not exist; give the folder to copy to every node\n"
    assert (a_file.returncode, a_file.stdout) == (2, "")
    assert "error: --code Pulumi.yaml is a file" in a_file.stderr and "Traceback" not in a_file.stderr


def test_an_uninstallable_requirement_is_reported_in_the_resolvers_words(trainctl_home, tmp_path):
    root = project(tmp_path, "badreq")
    code = code_folder(tmp_path, requirements_txt="numpy==0.0.1\n")
    with stack_up(root, "badreq"):
        failed = trainctl("bootstrap", "--stack", "badreq", "--code", str(code), cwd=root)
    assert failed.returncode == 1 and failed.stdout == ""
    said = " ".join(failed.stderr.split())
    assert ("uv could not install requirements.txt: No solution found when resolving dependencies: "
            "Because there is no version of numpy==0.0.1") in said, failed.stderr
    log = root / "runs" / "stack-badreq" / "bootstrap" / "controller-prefetch.log"
    assert f"(all of its output: {log})" in said and log.is_file()
    # the progress line in a CI log: the whole reason and the whole path on it, nothing cut
    (board,) = [line for line in failed.stderr.splitlines() if re.match(r"\s+node0 env\s+failed", line)]
    assert board.endswith(f"we can conclude that your requirements are unsatisfiable. (all of its output: {log})")


SAVE_IN_WORKDIR = """\
import json, os
task = json.loads(os.environ["TF_CONFIG"])["task"]["type"]
os.makedirs("samples", exist_ok=True)
with open("snapshot.pt", "w") as f:
    f.write(task)
with open("samples/first.txt", "w") as f:
    f.write(task)
"""


def test_artifacts_named_workdir_are_collected_from_the_chiefs_working_directory(trainctl_home, tmp_path):
    code = code_folder(tmp_path, save_py=SAVE_IN_WORKDIR)
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({
        "name": "wdart", "stack": "local", "overrides": {"nodes": 2}, "code": str(code), "ttl_hours": 1,
        "run": {"framework": "tensorflow", "command": "python save.py"},  # every node saves its own
        "artifacts": ["workdir:snapshot.pt", "workdir:samples/", "workdir:never-written.pt"]}))
    runs = tmp_path / "runs"
    done = trainctl("run", str(exp), "--runs-dir", str(runs))
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = runs / run_id_of(done.stdout)
    assert (run_dir / "snapshot.pt").read_text() == "chief"
    assert (run_dir / "samples" / "first.txt").read_text() == "chief"
    assert "[trainctl] artifacts not found: workdir:never-written.pt" in done.stdout
    assert leftovers(run_id_of(done.stdout)) == []
