"""The boot wrapper's defaults for jax.distributed.initialize: what trainctl set fills only what
the program's call leaves out, whether the program passes arguments by position or by name; with
nothing set (outside a job) the program runs as it would alone. The wrapper inside a real JAX
across nodes: tests/e2e/test_jax_on_the_local_stack.py."""

from __future__ import annotations

from trainctl.launchers import jax_boot

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
