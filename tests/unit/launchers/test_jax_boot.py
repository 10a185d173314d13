"""The boot wrapper's defaults for jax.distributed.initialize: what trainctl set fills only what
the program's call leaves out, whether the program passes arguments by position or by name; with
nothing set (outside a job) the program runs as it would alone; a program that fails leaves at
once. The wrapper inside a real JAX
across nodes: tests/e2e/test_jax_on_the_local_stack.py."""

from __future__ import annotations

import subprocess
import sys

from trainctl.launchers import jax_boot, jax_env

ENV = {jax_boot.NUM_PROCESSES: "3", jax_boot.PROCESS_ID: "2", jax_boot.INIT_TIMEOUT: "3600"}


def recorded(*args, **kwargs):
    return args, kwargs


def test_a_call_without_arguments_gets_the_jobs_group_and_timeout():
    initialize = jax_boot.with_defaults(recorded, jax_boot.defaults(ENV))
    assert initialize() == ((), {"num_processes": 3, "process_id": 2, "initialization_timeout": 3600})


def test_what_the_program_passes_wins_by_name_or_by_position():
    initialize = jax_boot.with_defaults(recorded, jax_boot.defaults(ENV))
    assert initialize(process_id=0, initialization_timeout=10) == (
        (), {"process_id": 0, "initialization_timeout": 10, "num_processes": 3})
    assert initialize("10.0.0.2:1234", 2, 1) == (("10.0.0.2:1234", 2, 1), {"initialization_timeout": 3600})
    assert initialize.__name__ == "recorded"


def test_outside_a_job_nothing_is_changed():
    assert jax_boot.defaults({}) == {}
    jax_boot.install({})  # returns before importing JAX, which this interpreter lacks


def booted(tmp_path, program: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "prog.py").write_text(program)
    return subprocess.run([sys.executable, "-c", jax_env.BOOT_SOURCE, "prog.py", "a", "b"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


def test_the_program_runs_as_python_runs_a_script(tmp_path):
    done = booted(tmp_path, "import sys\nprint(sys.argv, __name__)\n")
    assert done.returncode == 0 and done.stdout == "['prog.py', 'a', 'b'] __main__\n", done.stderr


def test_a_failing_program_leaves_at_once_without_the_exit_handlers_that_wait_for_peers(tmp_path):
    # JAX's shutdown is such a handler: it waits for every peer (jax_boot.failed)
    program = "import atexit\natexit.register(print, 'exit handler ran')\n"
    raised = booted(tmp_path, program + "raise RuntimeError('boom')\n")
    assert raised.returncode == 1 and "RuntimeError: boom" in raised.stderr
    assert "exit handler ran" not in raised.stdout
    stopped = booted(tmp_path, program + "raise SystemExit(143)\n")
    assert (stopped.returncode, stopped.stdout, stopped.stderr) == (143, "", "")
    assert booted(tmp_path, program).stdout == "exit handler ran\n"  # a program that succeeds ends as usual
