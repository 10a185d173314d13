"""trainctl: plan, up, bootstrap, launch, run, exec, status, logs, ssh, down.

The verbs live by what they act on (project_verbs, stack_verbs, node_verbs, experiment_verbs);
this module puts them under one command and turns trainctl's errors into exit codes. Each verb
imports what it uses when it runs: `--help` and `ls` start in a fraction of the time the models,
Pulumi, fabric and rich's tables take to load (bench/cli_start.py)."""

from __future__ import annotations

import gc
import sys
from typing import Any

import typer

from infra.errors import ConfigError, ProvisionError, TrainctlError
from namespace_nodes.netns import CommandFailed
from trainctl.cli import detached_verbs, experiment_verbs, node_verbs, project_verbs, stack_verbs
from trainctl.cli.output import console, fail
from trainctl.cli.streams import outlive_readers

# Wide enough that the longest option help stays on the option's line.
PIPE_HELP_WIDTH = 160


def _help_style() -> dict[str, Any]:
    """Boxed rich help on a terminal; plain help on one line per option in a pipe or CI log,
    where rich would draw 80-column boxes and cut option help to fragments."""
    if sys.stdout.isatty():
        return {}
    return {"rich_markup_mode": None,
            "context_settings": {"terminal_width": PIPE_HELP_WIDTH, "max_content_width": PIPE_HELP_WIDTH}}


app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Provision, bootstrap, launch and tear down distributed training clusters.",
                  **_help_style())
# Added without a name, a group's verbs are trainctl's own, listed in this order.
app.add_typer(project_verbs.verbs)
app.add_typer(stack_verbs.verbs)
app.add_typer(node_verbs.verbs)
app.add_typer(experiment_verbs.verbs)
app.add_typer(detached_verbs.verbs)


def main() -> None:
    outlive_readers()
    try:
        _main()
    finally:
        # The command is done: the interpreter's last collections would walk every object of
        # pydantic, rich, paramiko (measured on a one-node `bootstrap`: 56-79 ms from the last
        # atexit handler to the process's end, 11-14 ms frozen). Objects still go by reference
        # counting, and atexit handlers still run.
        gc.freeze()


def _main() -> None:
    try:
        # Without standalone mode click returns typer.Exit's code instead of exiting.
        code = app(standalone_mode=False)
        if code == 130:  # typer's answer to a KeyboardInterrupt (Ctrl-C, SIGTERM, SIGHUP)
            console().print("interrupted", style="yellow")
        sys.exit(code if isinstance(code, int) else 0)
    except ConfigError as exc:
        console().print(f"error: {exc}", style="red", markup=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except TrainctlError as exc:  # what failed is in the message; no traceback
        fail(exc.title, str(exc))
        sys.exit(exc.exit_code)
    except CommandFailed as exc:  # the namespace machinery's own error: creating a node failed
        fail(ProvisionError.title, str(exc))
        sys.exit(ProvisionError.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        console().print("interrupted", style="yellow")
        sys.exit(130)
    except typer.TyperException as exc:  # click's usage errors: a bad option or argument
        show = getattr(exc, "show", None)
        if show:
            show()
        else:
            console().print(f"error: {exc}", style="red", markup=False)
        sys.exit(getattr(exc, "exit_code", 2))


if __name__ == "__main__":
    main()
