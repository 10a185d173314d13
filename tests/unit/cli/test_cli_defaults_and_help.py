"""What a new user sees from the CLI before anything runs: defaults that agree with each other,
an empty `ls` that says what to do, and --help that survives a pipe."""

from __future__ import annotations

import re

from conftest import trainctl
from trainctl.jobs.experiment_spec import RestartSection
from trainctl.launchers import DEFAULT_JOB_RETRIES, DEFAULT_MAX_RESTARTS
from trainctl.launchers.spec import LaunchSpec


def _unboxed(help_text: str) -> str:
    """Help text with table borders and line breaks folded away, for sentence matching."""
    return re.sub(r"[\s│╭╮╰╯─]+", " ", help_text)


def test_restart_defaults_are_ai_platforms_and_the_same_everywhere():
    assert (DEFAULT_MAX_RESTARTS, DEFAULT_JOB_RETRIES) == (5, 3)
    spec = LaunchSpec(run_id="r", command=("python", "t.py"))
    assert (spec.max_restarts, spec.job_retries) == (DEFAULT_MAX_RESTARTS, DEFAULT_JOB_RETRIES)
    section = RestartSection()
    assert (section.max_restarts, section.job_retries) == (DEFAULT_MAX_RESTARTS, DEFAULT_JOB_RETRIES)


def test_launch_help_shows_the_restart_defaults():
    shown = _unboxed(trainctl("launch", "--help").stdout)
    assert f"torchrun restarts of the worker group [default: {DEFAULT_MAX_RESTARTS}]" in shown
    assert f"reruns of the whole job from its checkpoints [default: {DEFAULT_JOB_RETRIES}]" in shown


def test_ls_with_no_stack_up_says_so_and_how_to_start_one(trainctl_home):
    listed = trainctl("ls")
    assert listed.returncode == 0, listed.stderr
    out = " ".join((listed.stdout + listed.stderr).split())
    assert "no stack is up" in out.lower()
    assert "trainctl up --stack local" in out
    assert "trainctl run examples/digits-ddp.yaml" in out


def test_help_in_a_pipe_keeps_every_option_sentence_whole():
    # capture_output: stdout is a pipe, as in a CI log or `| less`.
    shown = trainctl("launch", "--help", env={"COLUMNS": "", "TERMINAL_WIDTH": ""}).stdout
    for sentence in ("stack name (stacks/Pulumi.<stack>.yaml) or the stack file it was stood up from",
                     "print each node's command (GKE: the manifests); run nothing",
                     "reruns of the whole job from its checkpoints"):
        assert any(sentence in line for line in shown.splitlines()), shown


def test_top_level_help_in_a_pipe_lists_commands_unbroken():
    shown = trainctl("--help", env={"COLUMNS": "", "TERMINAL_WIDTH": ""}).stdout
    assert "Provision, bootstrap, launch and tear down distributed training clusters." in shown
    assert not any(line.rstrip().endswith("…") for line in shown.splitlines()), shown


def test_lines_echoed_from_many_node_threads_never_run_into_each_other():
    """Through a pipe, as `trainctl run | tee` or a CI log reads them."""
    import subprocess
    import sys

    script = ("import threading\nfrom trainctl.cli.output import out\n"
              "def node(i):\n    for k in range(2000):\n        out(f'[node{i} r{i}]:rank {i}/8 line {k}')\n"
              "ts = [threading.Thread(target=node, args=(i,)) for i in range(8)]\n"
              "[t.start() for t in ts]; [t.join() for t in ts]\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert len(lines) == 8 * 2000
    assert all(line.count("[node") == 1 and line.startswith("[node") for line in lines)
