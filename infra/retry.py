"""The one retry policy for transient failures (tenacity): exponential backoff with a cap,
bounded by a deadline or a number of attempts. Permanent failures are never retried: the
caller's predicate says which failures are transient."""

from __future__ import annotations

import time
from typing import Any, Callable

from tenacity import (RetryCallState, Retrying, retry_if_exception, retry_if_result, stop_after_attempt,
                      stop_any, stop_before_delay, wait_exponential, wait_fixed)


def on_transient_errors(transient: Callable[[BaseException], bool], *, deadline: float,
                        first: float = 0.1, cap: float = 2.0) -> Retrying:
    """Retry a call while it raises what `transient` accepts, until the monotonic `deadline`;
    other exceptions propagate at once. Past the deadline: tenacity.RetryError (last attempt
    inside)."""
    return Retrying(retry=retry_if_exception(transient),
                    wait=wait_exponential(multiplier=first, max=cap),
                    stop=stop_before_delay(max(0.0, deadline - time.monotonic())))


def on_results(again: Callable[[Any], bool], *, attempts: int | None = None, within: float | None = None,
               first: float = 0.5, cap: float = 8.0, fixed: float | None = None,
               before_sleep: Callable[[RetryCallState], None] | None = None) -> Retrying:
    """Call again while `again(result)` holds, up to `attempts` calls or `within` seconds; then
    the last result is returned (the caller judges it)."""
    stops = ([stop_after_attempt(attempts)] if attempts else []) + ([stop_before_delay(within)] if within else [])
    return Retrying(retry=retry_if_result(again),
                    wait=wait_fixed(fixed) if fixed is not None else wait_exponential(multiplier=first, max=cap),
                    stop=stop_any(*stops),
                    retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
                    before_sleep=before_sleep)
