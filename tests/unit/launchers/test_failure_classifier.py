"""Failures a retry cannot fix are told from the others by what the program printed as it died:
the tracebacks and messages here come from real interpreters, shells and torch, as a user's
program would print them on a node."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainctl.launchers.failures import Failure, classify, shared


def died(argv: list[str], cwd: Path | None = None) -> tuple[list[str], int]:
    """A real program's last lines (stdout and stderr) and exit code, as trainctl's stream has
    them: prefixed with the node and rank."""
    done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=120)
    lines = (done.stdout + done.stderr).splitlines()
    assert done.returncode != 0, lines
    return [f"[node1 r1]:{line}" for line in lines], done.returncode


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.parametrize("argv, words", [
    (python("print('loading'); import tensorflow_datasets_nosuch"),
     "module tensorflow_datasets_nosuch is not installed on the nodes"),
    ([sys.executable, "-m", "trainer_nosuch.task"], "module trainer_nosuch is not installed"),
    (python("from json import nosuchname"), "json has no nosuchname"),
    (python("def f(:\n  pass"), "the program does not compile (SyntaxError)"),
    (python("print(undefined_variable)"), "refers to a name it never defines"),
    ([sys.executable, "no_such_train.py"], "no_such_train.py is not on the node"),
    (["bash", "-c", "gcsfuse --help"], "gcsfuse is not installed on the nodes"),
    (python("import argparse; p = argparse.ArgumentParser(); p.add_argument('--lr'); p.parse_args()")
     + ["--learning-rate=0.1"], "does not accept the arguments --learning-rate=0.1"),
])
def test_a_program_that_cannot_start_is_not_retried_and_the_cause_is_named(argv, words, tmp_path):
    lines, code = died(argv, cwd=tmp_path)
    failure = classify(lines, code)
    assert failure.unfixable and words in failure.cause, (failure, lines)
    assert "[node1" not in failure.error  # the line as the program printed it


@pytest.mark.parametrize("code, words", [
    ("import torch; torch.zeros(1).cuda()", "the nodes' torch is a CPU build"),
    ("import os, torch.distributed as d; os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT='29399',"
     " RANK='0', WORLD_SIZE='1'); d.init_process_group('nccl')", "lacks; on CPU nodes use gloo"),
])
def test_gpu_code_on_a_cpu_node_is_not_retried(code, words, trainer_python):
    lines, exit_code = died([str(trainer_python), "-c", code])
    failure = classify(lines, exit_code)
    assert failure.unfixable and words in failure.cause, (failure, lines[-3:])


def test_no_nvidia_driver_is_not_retried():
    # A CUDA build of torch on a node without a driver (c10/cuda/CUDAFunctions.cpp): no CUDA
    # build or driverless GPU here to print it, so the lines are the ones users report.
    lines = ["[node0 r0]:  File \"/w/code/train.py\", line 9, in <module>",
             "[node0 r0]:    model = Net().to('cuda')",
             "[node0 r0]:RuntimeError: Found no NVIDIA driver on your system. Please check that you have "
             "an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx"]
    failure = classify(lines, 1)
    assert failure.unfixable and "the node has no NVIDIA driver" in failure.cause


@pytest.mark.parametrize("argv, error", [
    (python("import sys; print('epoch 3 loss nan'); sys.exit(1)"), "exit code 1"),
    (python("raise ConnectionResetError(104, 'Connection reset by peer')"),
     "ConnectionResetError: [Errno 104] Connection reset by peer"),
    (python("import os; os.abort()"), "killed by SIGABRT"),
])
def test_a_failure_a_retry_may_fix_is_left_to_the_restart_policy(argv, error):
    lines, code = died(argv)  # a death by signal is -N, as torchrun reports it too
    failure = classify(lines, code)
    assert not failure.unfixable and failure.error == error, (failure, lines)


def test_the_same_error_in_two_runs_is_the_same_failure_whatever_numbers_it_names():
    one = classify(["[node0 r0]:RuntimeError: shape [32, 10] does not match [32, 64] at 0x7f3a9c"], 1)
    two = classify(["[node1 r1]:RuntimeError: shape [16, 10] does not match [16, 128] at 0x7f00aa"], 1)
    other = classify(["[node1 r1]:ValueError: labels column missing"], 1)
    assert one.signature == two.signature != other.signature
    assert shared([one, two]) is one
    assert shared([one, other]) is None
    assert shared([one, None, two]) is None  # a trial that did not fail
    assert shared([]) is None


def test_the_last_exception_is_the_error_not_earlier_lines_or_warnings():
    lines = ["[node0 r0]:/w/venv/lib/python3.11/site-packages/x.py:3: UserWarning: No module named 'numpy'",
             "[node0 r0]:Traceback (most recent call last):",
             "[node0 r0]:ValueError: bad batch",
             "[node0 r0]:",
             "[node0 r0]:During handling of the above exception, another exception occurred:",
             "[node0 r0]:KeyError: 'labels'",
             "[node0 r0]:saving what we have"]
    assert classify(lines, 1) == Failure("KeyError: 'labels'")
    # torch's warning names a missing module; what killed the program is another matter
    warned = ["[node0 r0]:/w/venv/lib/python3.11/site-packages/torch/_subclasses/functional_tensor.py:368: "
              "UserWarning: Failed to initialize NumPy: No module named 'numpy' (Triggered internally)",
              "[node0 r0]:  cpu = _conversion_method_template(device=torch.device(\"cpu\"))"]
    assert not classify(warned, 1).unfixable and not classify(warned, -9).unfixable


@pytest.mark.parametrize("last_line, words", [
    # TF's multi_worker_with_keras tutorial with Keras 3 (keras-team/keras#20585), as it ends on a node
    ("ValueError: Attempt to convert a value (PerReplica:{\n  0: <tf.Tensor: shape=(64, 28, 28)>}) with an "
     "unsupported type (<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor.",
     "install tf_keras in the requirements and set TF_USE_LEGACY_KERAS=1"),
    # a dataset download from a node without a route: urllib's and requests' wording
    ("urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>",
     "(Temporary failure in name resolution): nodes without a route"),
    ("requests.exceptions.ConnectionError: HTTPSConnectionPool(host='storage.googleapis.com', port=443): Max "
     "retries exceeded with url: /x (Caused by NameResolutionError(\"Failed to resolve 'storage.googleapis.com' "
     "([Errno -2] Name or service not known)\"))", "(Name or service not known)"),
    ("OSError: [Errno 101] Network is unreachable", "(Network is unreachable)"),
])
def test_failures_every_rerun_repeats_are_not_retried(last_line, words):
    lines = ["[node0 r0]:Traceback (most recent call last):", "[node0 r0]:  File \"/w/code/train.py\", line 3",
             *[f"[node0 r0]:{line}" for line in last_line.splitlines()]]
    failure = classify(lines, 1)
    assert failure.unfixable and words in failure.cause, failure
