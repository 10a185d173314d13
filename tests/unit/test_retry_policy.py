"""The one retry policy: transient failures are retried with backoff within a bound, permanent
ones propagate at once, and a bounded retry hands back the last outcome."""

from __future__ import annotations

import time

import pytest
from tenacity import RetryError

from infra.retry import on_results, on_transient_errors


class Transient(Exception):
    pass


def test_transient_errors_are_retried_until_the_call_succeeds():
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise Transient("not yet")
        return "up"

    assert on_transient_errors(lambda e: isinstance(e, Transient), deadline=time.monotonic() + 30, first=0)(flaky) == "up"
    assert len(calls) == 3


def test_a_permanent_error_propagates_on_the_first_call():
    calls = []

    def refused() -> None:
        calls.append(1)
        raise PermissionError("host key refused")

    with pytest.raises(PermissionError):
        on_transient_errors(lambda e: isinstance(e, Transient), deadline=time.monotonic() + 30, first=0)(refused)
    assert len(calls) == 1


def test_past_the_deadline_the_last_transient_error_is_kept():
    def never() -> None:
        raise Transient("still down")

    with pytest.raises(RetryError) as err:
        on_transient_errors(lambda e: isinstance(e, Transient), deadline=time.monotonic() + 0.05, first=0.01)(never)
    assert str(err.value.last_attempt.exception()) == "still down"


def test_a_bounded_retry_on_results_returns_the_last_result():
    codes = iter([255, 12, 23, 0])
    assert on_results(lambda code: code in (12, 255), attempts=5, first=0)(lambda: next(codes)) == 23
    codes = iter([255, 255, 255, 0])
    assert on_results(lambda code: code in (12, 255), attempts=3, first=0)(lambda: next(codes)) == 255
