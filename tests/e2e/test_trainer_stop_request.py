"""The reference trainers (PyTorch DDP, TensorFlow multi-worker) treat SIGTERM (a spot VM's
shutdown, a stop) as a request: the step in flight and any checkpoint being written finish, the
exact position is saved, and a resumed run ends where an undisturbed one does. Real processes, a
local job dir."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO
from trainers.stop_request import ACK_SECONDS

# The trainers' environment (torch) is built as bootstrap builds the nodes': the e2e tier's.
pytestmark = pytest.mark.e2e


def test_sigterm_mid_epoch_saves_the_position_and_the_resumed_run_ends_as_an_undisturbed_one(
        tmp_path, trainer_python):
    TRAIN = [str(trainer_python), "-m", "trainers.digits_ddp", "--epochs", "3"]

    def train(job_dir: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*TRAIN, "--job-dir", str(job_dir)], cwd=REPO, capture_output=True,
                              text=True, timeout=120)

    calm = train(tmp_path / "calm")
    assert calm.returncode == 0, calm.stderr
    undisturbed = json.loads((tmp_path / "calm" / "metrics.json").read_text())

    job = tmp_path / "stopped"
    proc = subprocess.Popen([*TRAIN, "--job-dir", str(job), "--epoch-sleep", "0.3"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("epoch 1/3"):
            break
    time.sleep(0.35)  # into epoch 2's steps (after the pause between epochs)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    output = "".join(lines) + rest
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert "stopping at step" in output and "(SIGTERM); checkpoint saved" in output
    stopped_at = int(output.split("stopping at step ")[1].split()[0])
    assert stopped_at > undisturbed["steps_per_epoch"]  # not the epoch checkpoint: a later step

    resumed = train(job)
    assert resumed.returncode == 0, resumed.stderr
    assert f"(step {stopped_at})" in resumed.stdout  # nothing redone
    metrics = json.loads((job / "metrics.json").read_text())
    assert (metrics["steps"], metrics["test_accuracy"]) == (undisturbed["steps"], undisturbed["test_accuracy"])
    assert [h["step"] for h in metrics["history"]] == [h["step"] for h in undisturbed["history"]]



def free_loopback_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def test_sigterm_on_one_tf_worker_stops_both_at_one_step_and_the_resumed_run_ends_as_an_undisturbed_one(
        tmp_path, tf_trainer_python):
    """Two MultiWorkerMirroredStrategy workers on loopback, as TF_CONFIG describes them. Only
    the non-chief gets SIGTERM (its VM is the one reclaimed): its stop vote reaches the chief in
    the next step's all-reduce, both leave after that step, and the chief saves that position."""
    cluster = {"worker": [f"127.0.0.1:{p}" for p in free_loopback_ports(2)]}

    def worker(i: int, job_dir: Path, extra: tuple[str, ...]) -> subprocess.Popen[str]:
        # Its stderr goes to a file beside the job dir: a failed assertion shows why a worker
        # ended as it did (TF's errors, a traceback), not only the chief's stdout.
        with open(f"{job_dir}-worker-{i}.stderr", "w") as stderr:
            return subprocess.Popen(
                [str(tf_trainer_python), "-m", "trainers.digits_keras", "--epochs", "3", "--job-dir",
                 str(job_dir), *extra], cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=stderr,
                env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2",
                     "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})})

    def workers(job_dir: Path, *extra: str) -> list[subprocess.Popen[str]]:
        return [worker(i, job_dir, extra) for i in range(2)]

    def finish(procs: list[subprocess.Popen[str]], job_dir: Path, head: str = "") -> tuple[list[int], str]:
        """The workers' exit codes, and the chief's stdout followed by each worker's stderr tail."""
        try:
            outputs = [p.communicate(timeout=180)[0] for p in procs]
        finally:
            for p in procs:
                p.kill()
        tails = "".join(f"\n--- worker {i} stderr (tail) ---\n"
                        + Path(f"{job_dir}-worker-{i}.stderr").read_text()[-3000:] for i in range(len(procs)))
        return [p.returncode for p in procs], head + outputs[0] + tails

    codes, calm = finish(workers(tmp_path / "calm"), tmp_path / "calm")
    assert codes == [0, 0], calm
    undisturbed = json.loads((tmp_path / "calm" / "metrics.json").read_text())

    job = tmp_path / "stopped"
    # The chief pauses after each epoch for longer than the watch's default deadline: the
    # non-chief's vote then waits for the chief in epoch 2's first step, as on a loaded machine,
    # and reaches it only if the stop waits for that step, not for a clock.
    procs = workers(job, "--epoch-sleep", str(2 * ACK_SECONDS))
    chief = procs[0]
    assert chief.stdout
    head = ""
    for line in chief.stdout:
        head += line
        if line.startswith("epoch 1/3"):
            break
    procs[1].send_signal(signal.SIGTERM)  # lands in the chief's pause
    codes, output = finish(procs, job, head)
    assert codes == [128 + signal.SIGTERM] * 2, output
    assert "(a peer's SIGTERM); checkpoint saved" in output and "not every peer reached" not in output, output
    stopped_at = int(output.split("stopping at step ")[1].split()[0])
    assert stopped_at > undisturbed["steps_per_epoch"], output  # not the epoch checkpoint: a later step

    codes, resumed = finish(workers(job), job)
    assert codes == [0, 0], resumed
    assert f"(step {stopped_at})" in resumed, resumed  # nothing redone
    metrics = json.loads((job / "metrics.json").read_text())
    assert (metrics["steps"], metrics["test_accuracy"]) == (undisturbed["steps"], undisturbed["test_accuracy"]), resumed
    assert metrics["history"] == undisturbed["history"], resumed  # the same batches in the same order


# A checkpoint write that receives SIGTERM halfway through its bytes (as a reclaimed VM's
# shutdown can land): with the trainer's handler the write completes; the process then leaves.
WRITE_INTERRUPTED = textwrap.dedent("""
    import contextlib, os, signal, sys, torch
    from trainers import checkpoint, storage
    from trainers.stop_request import EXIT_CODE, StopRequest

    stop = StopRequest.install() if sys.argv[2] == "handled" else None
    plain_write = storage.write_bytes

    def write_with_notice(uri, data):
        if uri.endswith(".pt") and "000000002" in uri:
            # half of the object's bytes reach the disk, then the shutdown's SIGTERM arrives
            tmp = uri + ".partial"
            with open(tmp, "wb") as fh:
                fh.write(data[: len(data) // 2])
                fh.flush()
                os.kill(os.getpid(), signal.SIGTERM)
                fh.write(data[len(data) // 2:])
            os.replace(tmp, uri)
            return
        plain_write(uri, data)

    storage.write_bytes = write_with_notice
    for step in (1, 2):
        with stop.busy() if stop else contextlib.nullcontext():  # as the trainer saves
            checkpoint.save(sys.argv[1], step, {"step": step, "weights": torch.full((1_000_000,), float(step))})
    sys.exit(EXIT_CODE if stop and stop.requested else 0)
""")


LOAD_LATEST = ("import sys; from trainers import checkpoint; s = checkpoint.load_latest(sys.argv[1]); "
               "print(s['step'], float(s['weights'][-1]))")


@pytest.mark.parametrize("handler", ["handled", "default"])
def test_a_stop_request_during_a_checkpoint_write_leaves_a_loadable_checkpoint(tmp_path, handler,
                                                                               trainer_python):
    ckpt = tmp_path / "checkpoints"
    proc = subprocess.run([str(trainer_python), "-c", WRITE_INTERRUPTED, str(ckpt), handler], cwd=REPO,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == (128 + signal.SIGTERM if handler == "handled" else -signal.SIGTERM), proc.stderr
    # With the handler the interrupted write finished and is the latest; without it the process
    # died mid-write and the previous checkpoint is still the one that loads.
    expected = 2 if handler == "handled" else 1
    loaded = subprocess.run([str(trainer_python), "-c", LOAD_LATEST, str(ckpt)], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert loaded.stdout.split() == [str(expected), str(float(expected))], loaded.stderr


# A rank blocked where no step ends (a collective waiting on a peer that torchrun is restarting,
# here a plain blocking read) must not outlive SIGTERM by much: torchrun waits 30 s for it.
BLOCKED = textwrap.dedent("""
    import os, sys, time
    from trainers.stop_request import StopRequest

    StopRequest.install()
    print("ready", flush=True)
    os.read(os.open(sys.argv[1], os.O_RDONLY), 1)  # blocks in C, as a gloo all-reduce would
""")


def test_a_process_blocked_in_a_collective_leaves_soon_after_sigterm(tmp_path, trainer_python):
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    proc = subprocess.Popen([str(trainer_python), "-c", BLOCKED, str(fifo)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout and proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    try:
        # the watch's grace (ACK_SECONDS) and no more; well under torchrun's 30 s
        assert proc.wait(timeout=15) == 128 + signal.SIGTERM
    finally:
        proc.kill()
