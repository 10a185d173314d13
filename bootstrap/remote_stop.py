"""Remote commands that can be stopped: a marker in their environment, and the shell command
that ends every process carrying it.

Closing an SSH channel does not end the command behind it (without a terminal nothing sends it
SIGHUP), and its processes may have left the session (torchrun's workers start their own). What
every one of them inherits is the environment, so that is where the mark goes: one scan of
/proc finds the whole tree, on any Linux node, with nothing installed.
"""

from __future__ import annotations

import shlex


def marked(command: str, marker: str) -> str:
    """`command` run by the login shell as before, with `marker` (NAME=value) in the environment
    of that shell itself and of everything it starts."""
    return f'export {marker}; exec "${{SHELL:-/bin/sh}}" -c {shlex.quote(command)}'


def stop_marked(marker: str, grace: float, unwaited: str = "") -> str:
    """Kill every process on the node whose environment holds `marker`: TERM, up to `grace`
    seconds for them to leave, then KILL. Processes whose command line matches the shell case
    pattern `unwaited` are not waited for (they are killed with the rest)."""
    quoted = shlex.quote(marker)
    scan = ("for p in /proc/[0-9]*; do "
            f"if tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -qx {quoted}; then "
            "{action}; fi; done")
    waited = (f"case \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" in {unwaited}) ;; *) left=1;; esac"
              if unwaited else "left=1")
    left = "left=0; " + scan.format(action=waited) + '; [ "$left" = 1 ]'
    polls = int(grace / 0.1)
    return (f"{scan.format(action='kill -TERM ${p#/proc/} 2>/dev/null')}; "
            f"i=0; while [ $i -lt {polls} ] && {{ {left}; }}; do sleep 0.1; i=$((i+1)); done; "
            f"{scan.format(action='kill -KILL ${p#/proc/} 2>/dev/null')}; true")
