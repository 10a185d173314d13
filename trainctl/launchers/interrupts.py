"""Ctrl-C, SIGTERM and SIGHUP as one interrupt that is late at worst, never lost.

Python raises a handler's exception wherever the main thread happens to be. When that is a
finalizer or a weakref callback (a garbage collection while `collect` tears down gcsfs objects:
seen twice in 99 runs of the reliability loop), the interpreter prints "Exception ignored" and
carries on as if no signal had come. So the handler also latches the signal, and the run checks
the latch at every phase boundary and in the launch loop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Iterator

INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_pending: str | None = None  # why the run was interrupted, once it was


@contextlib.contextmanager
def _signal_handlers(signals: tuple[signal.Signals, ...], handler) -> Iterator[None]:
    """Install `handler` for `signals` while the block runs (main thread only, as Python requires).
    A signal the parent ignores stays ignored, as POSIX tools do: that is how `nohup` and a
    non-interactive shell's `&` keep a job alive."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in signals
                if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _latch_and_raise(signum: int, _frame: object) -> None:
    global _pending
    _pending = _pending or f"signal {signal.Signals(signum).name}"
    raise KeyboardInterrupt(_pending)


def raise_if_pending(cause: BaseException | None = None) -> None:
    """Raise the interrupt again if a signal came and its first raise was swallowed, or turned
    into another error by the code it interrupted (`cause`: Python 3.11 wraps an exception
    raised while a class is created, an import's say, in a RuntimeError)."""
    if _pending is not None:
        raise KeyboardInterrupt(_pending) from cause


def interrupt_main(reason: str) -> None:
    """Interrupt the run from another thread (the TTL timer), latched like a signal.

    Not `_thread.interrupt_main()`: it simulates SIGINT, which does nothing where SIGINT is
    ignored (a script's `&`), and, sending no real signal, waits for a blocking call in the main
    thread to return. A real signal trainctl handles, sent to the main thread, does neither;
    with none handled, the latch still ends the run at the next check."""
    global _pending
    _pending = _pending or reason
    handled = [s for s in INTERRUPT_SIGNALS if signal.getsignal(s) is _latch_and_raise]
    main_thread = threading.main_thread().ident
    if handled and main_thread is not None:
        signal.pthread_kill(main_thread, handled[0])


@contextlib.contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, and are latched."""
    global _pending
    _pending = None
    try:
        with _signal_handlers(INTERRUPT_SIGNALS, _latch_and_raise):
            yield
    finally:
        _pending = None


TEARDOWN_NOTICE = (b"[trainctl] teardown in progress: it finishes first "
                   b"(after a kill -9, `trainctl down` finishes it)\n")


def _teardown_notice(_signum: int, _frame: object) -> None:
    os.write(2, TEARDOWN_NOTICE)  # not print(): a handler may interrupt a print in progress


def uninterruptible():
    """Teardown must finish: further Ctrl-C / SIGTERM only say so while it runs."""
    return _signal_handlers(INTERRUPT_SIGNALS, _teardown_notice)
