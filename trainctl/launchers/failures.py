"""Failures that a retry cannot fix, recognised by what the program printed as it died.

A missing module, a syntax error, GPU code on a node without a GPU: every restart and every
rerun prints the same traceback again. The launcher's restart policy stops at the first one
(no torchrun restart, no job rerun) and the sweep stops when its first trials all fail the same
way. Each rule matches the line users see last (the exception line of a traceback, or the
interpreter's or the shell's own message) and says in words what is wrong and how to fix it.
Anything not recognised is left to the restart policy: retried.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from typing import Iterable, Sequence

# trainctl's and torchrun's line prefixes: "[node1 r1]:", "[node1] ", "[pod0 r0]:"
PREFIX_RE = re.compile(r"^\[[\w.-]+(?: r\d+)?\]:? ?")
# The last line of a Python traceback: "ModuleNotFoundError: No module named 'x'",
# "torch.distributed.DistBackendError: ...", a bare "AssertionError".
EXCEPTION_RE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception)(?::|$)")
VOLATILE_RE = re.compile(r"0x[0-9a-fA-F]+|\d+")
MAX_ERROR = 300  # characters of an error line kept: enough to read, not a whole dump


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    cause: str  # formatted with the match's groups


def _rule(pattern: str, cause: str) -> Rule:
    return Rule(re.compile(pattern), cause)


# Matched against the line a user reads as the error (see last_error_line): a traceback's
# exception line, or the interpreter's or the shell's own message when there is no traceback.
UNFIXABLE = (
    _rule(r"^ModuleNotFoundError: No module named '([\w.]+)'",
          "module {0} is not installed on the nodes; add it to the requirements or fix the import"),
    # `python -m pkg.task`: "python: No module named pkg", or "python: Error while finding module
    # specification for 'pkg.task' (ModuleNotFoundError: No module named 'pkg')"
    _rule(r"python[\d.]*: .*No module named '?([\w.]+)'?",
          "module {0} is not installed on the nodes; add it to the requirements or fix the module name"),
    _rule(r"^ImportError: cannot import name '?(\w+)'? from '?([\w.]+)'?",
          "{1} has no {0}: the installed version is not the one the program was written for; "
          "pin it in the requirements"),
    _rule(r"^(SyntaxError|IndentationError|TabError)\b", "the program does not compile ({0})"),
    _rule(r"^NameError: (.*)", "the program refers to a name it never defines ({0})"),
    _rule(r"python[\d.]*: can't open file '([^']+)'",
          "{0} is not on the node; is it inside the synced code (--code)?"),
    # bash: "bash: line 1: gcsfuse: command not found"; dash: "sh: 1: gcsfuse: not found"
    _rule(r"^(?:\S*/)?\w*sh: (?:line )?(?:\d+: )?(\S+): (?:command )?not found$",
          "{0} is not installed on the nodes"),
    _rule(r"^RuntimeError: Found no NVIDIA driver on your system",
          "the node has no NVIDIA driver: GPU code on a node without a GPU; use a GPU stack, or let "
          "the program fall back to the CPU"),
    _rule(r"^AssertionError: Torch not compiled with CUDA enabled",
          "the program asks for CUDA, and the nodes' torch is a CPU build; use a GPU stack, or let "
          "the program fall back to the CPU"),
    _rule(r"^RuntimeError: No CUDA GPUs are available", "the program asks for CUDA, and the node has no GPU"),
    _rule(r"^RuntimeError: Distributed package doesn't have NCCL built in",
          "the program asks for the NCCL backend, which this torch build lacks; on CPU nodes use gloo"),
    # Keras 3's model.fit under a tf.distribute strategy hands the model PerReplica values it
    # cannot convert (keras-team/keras#20585): the same at every rerun.
    _rule(r"^ValueError: Attempt to convert a value \(PerReplica",
          "Keras 3's model.fit does not run under a tf.distribute strategy (keras-team/keras#20585); "
          "install tf_keras in the requirements and set TF_USE_LEGACY_KERAS=1 in the experiment's env, "
          "or train with a custom loop"),
    # getaddrinfo's EAI_AGAIN / EAI_NONAME, and a connect without a route, wherever the program
    # printed them (urllib, requests, a dataset loader): a node without a route to the internet
    # (simulated and offline nodes) fails so on every rerun.
    _rule(r"\[Errno -[23]\] (Temporary failure in name resolution|Name or service not known)|"
          r"\[Errno 101\] (Network is unreachable)",
          "the program reaches a host the node cannot reach ({0}{1}): nodes without a route to the "
          "internet cannot download; stage the data with the experiment's `data:` or ship it with the code"),
    # argparse: "prog: error: unrecognized arguments: --lr=0.1" (after its usage line)
    _rule(r"^\S+: error: unrecognized arguments: (.*)", "the program does not accept the arguments {0}"),
    _rule(r"^\S+: error: the following arguments are required: (.*)", "the program needs the arguments {0}"),
)


@dataclass(frozen=True)
class Failure:
    """What a failed program showed last (`error`), and why no retry can fix it (`cause`;
    None: a retry might)."""
    error: str
    cause: str | None = None

    @property
    def unfixable(self) -> bool:
        return self.cause is not None

    @property
    def signature(self) -> str:
        """The error with what changes from run to run (numbers, addresses) taken out: two
        failures with the same signature are the same failure."""
        return VOLATILE_RE.sub("N", self.error)

    def describe(self) -> str:
        return f"{self.error} ({self.cause}), which no retry can fix" if self.cause else self.error


def last_error_line(lines: Iterable[str]) -> str | None:
    """The line a user would read as the error: the last exception line of a traceback, else
    the last line the program printed."""
    text = [PREFIX_RE.sub("", line).rstrip() for line in lines]
    text = [line for line in text if line.strip()]
    exceptions = [line for line in text if EXCEPTION_RE.match(line)]
    if exceptions:
        return exceptions[-1]
    return text[-1] if text else None


def exit_description(exit_code: int | None) -> str:
    if exit_code is None:
        return "no exit code"
    if exit_code < 0:  # torchrun and Python report a death by signal as its negative number
        try:
            return f"killed by {signal.Signals(-exit_code).name}"
        except ValueError:
            pass
    return f"exit code {exit_code}"


def classify(lines: Iterable[str], exit_code: int | None) -> Failure:
    """The failure of a program that printed `lines` (its last ones) and ended with `exit_code`."""
    line = last_error_line(lines)
    if line is not None and (exit_code is None or exit_code >= 0):  # a signal's death can be retried
        for rule in UNFIXABLE:
            match = rule.pattern.search(line)
            if match:
                return Failure(line[:MAX_ERROR], rule.cause.format(*(group or "" for group in match.groups())))
    if line is not None and EXCEPTION_RE.match(line):
        return Failure(line[:MAX_ERROR])
    return Failure(exit_description(exit_code))


def shared(outcomes: Sequence[Failure | None]) -> Failure | None:
    """The one failure these outcomes all are, if they are all failures and the same one (None
    stands for an outcome that was no failure)."""
    first = outcomes[0] if outcomes else None
    if first is not None and all(f is not None and f.signature == first.signature for f in outcomes):
        return first
    return None
