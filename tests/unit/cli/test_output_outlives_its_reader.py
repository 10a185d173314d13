"""A run's output outlives its reader: once the pipe or terminal trainctl writes to is gone,
every later line (from any thread, on stdout and stderr) goes nowhere instead of raising, so the
run still reaches its end and its teardown. Before, the BrokenPipeError of the line announcing a
stop aborted the stop, and the run waited forever on nodes nobody stopped (a CI run's
`trainctl run` of parameter servers, left by its killed pytest)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import REPO

CHILD = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    from trainctl.cli.streams import outlive_readers
    outlive_readers()
    from trainctl.cli.output import out, say
    out("ready")
    sys.stdin.readline()  # the test has closed the read ends of stdout and stderr by now

    def lines(node):
        for i in range(2000):
            out(f"[{node}] line {i}")
    threads = [threading.Thread(target=lines, args=(f"node{n}",)) for n in range(4)]
    [t.start() for t in threads]
    say("[trainctl] interrupted: stopping run r on every node")
    [t.join() for t in threads]
    Path(sys.argv[1]).write_text("torn down")
""")


def test_lines_written_after_the_reader_went_away_neither_raise_nor_stop_the_process(tmp_path):
    marker = tmp_path / "teardown"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(marker)], cwd=REPO, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stderr is not None and child.stdin is not None
    assert child.stdout.readline() == "ready\n"
    child.stdout.close()
    child.stderr.close()
    child.stdin.write("go\n")
    child.stdin.close()
    assert child.wait(timeout=120) == 0
    assert marker.read_text() == "torn down"


def test_another_write_error_is_still_raised(tmp_path):
    from trainctl.cli.streams import ReaderMayGo

    with open(tmp_path / "f", "w") as f:
        stream = ReaderMayGo(f)
        f.close()
        try:
            stream.write("x")
        except ValueError:  # a closed file is a bug, not a reader that went away
            return
    raise AssertionError("a write to a closed file passed silently")
