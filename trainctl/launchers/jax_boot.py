"""Runs a JAX program on a node trainctl launched: `python -c <this file> script.py args` or
`python -c <this file> -m module args`. Before the program starts, `jax.distributed.initialize`
gets defaults for what the program leaves out: the coordinator, the process count and this
process's id that trainctl set in the environment (trainctl/launchers/jax_env.py), and a long
initialization timeout. A program that calls `jax.distributed.initialize()` with no arguments
then joins the job's process group, unchanged, as it would on a TPU VM or under SLURM.

Why a wrapper and not only variables: JAX reads the coordinator from JAX_COORDINATOR_ADDRESS
itself (jax/_src/distributed.py, State.initialize), but the process count and id only from an
environment it detects (jax/_src/clusters/: SLURM, Open MPI, Kubernetes, Cloud TPU metadata), none
of which a CPU or GPU VM is, and the initialization timeout (300 s by default) only as an
argument. Arguments the program passes itself win.

Shipped alone as the source of `python -c`: it imports nothing of trainctl."""

import functools
import os
import runpy
import sys
import traceback

# Environment trainctl sets beside JAX's own JAX_COORDINATOR_ADDRESS (trainctl/launchers/jax_env.py).
NUM_PROCESSES = "TRAINCTL_JAX_NUM_PROCESSES"
PROCESS_ID = "TRAINCTL_JAX_PROCESS_ID"
INIT_TIMEOUT = "TRAINCTL_JAX_INITIALIZATION_TIMEOUT"
# jax.distributed.initialize's leading positional parameters (jax/_src/distributed.py).
POSITIONAL = ("coordinator_address", "num_processes", "process_id")


def defaults(environ):
    """initialize's keyword defaults from the environment trainctl set; none outside a job."""
    if NUM_PROCESSES not in environ:
        return {}
    return {"num_processes": int(environ[NUM_PROCESSES]), "process_id": int(environ[PROCESS_ID]),
            "initialization_timeout": int(environ[INIT_TIMEOUT])}


def with_defaults(initialize, given):
    """`initialize` with `given` as defaults for the parameters a call does not pass."""
    @functools.wraps(initialize)
    def wrapped(*args, **kwargs):
        positional = set(POSITIONAL[:len(args)])
        for name, value in given.items():
            if name not in positional:
                kwargs.setdefault(name, value)
        return initialize(*args, **kwargs)
    return wrapped


def install(environ):
    given = defaults(environ)
    if not given:
        return
    try:
        import jax.distributed
    except ImportError:  # no JAX in this environment: the program's own import will say so
        return
    jax.distributed.initialize = with_defaults(jax.distributed.initialize, given)


def run(argv):
    """Runs `script args` or `-m module args` as `python` would run it."""
    if argv[:1] == ["-m"]:
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


def failed(code, why=None):
    """Leaves at once with the program's failure, skipping the interpreter's exit handlers:
    JAX's own (jax/_src/api.py `clean_up`, registered with atexit, calls distributed.shutdown())
    waits in a shutdown barrier for every peer, up to 300 s (shutdown_timeout_seconds), while the
    peers wait in a collective for this process. Seen on a simulated TPU stack: a worker whose
    program raised sat there over 6 minutes, its run going on. Leaving at once, its node's exit
    reaches the launcher, which fails the run and stops the others."""
    if why is None:
        traceback.print_exc()
    elif why:
        print(why, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    install(os.environ)
    try:
        run(sys.argv[1:])
    except SystemExit as leaving:
        if leaving.code not in (None, 0):
            code = leaving.code
            failed(code, "") if isinstance(code, int) else failed(1, code)
        raise
    except BaseException:
        failed(1)
