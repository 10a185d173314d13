"""Runs the project's Python program as Pulumi's Python language host does
(sdk/python/cmd/pulumi-language-python-exec): the stack's config set from PULUMI_CONFIG, the
runtime configured with the engine's monitor, the program run with runpy inside
`pulumi.runtime.run_in_stack`, on an event loop whose default executor has room for the
parallel registrations. The monitor is the engine's object in this process instead of a gRPC
address: everything the SDK sends is the same request."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import runpy
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gcpsim.pulumi.project import Project

PARALLEL = 64  # registrations in flight at once (each waits for its step to finish)


class ProgramError(Exception):
    """The program failed: its message as the language host logs it."""


class EngineLog:
    """The engine service the SDK logs to: messages become the stack's diagnostics."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def Log(self, request: Any) -> None:
        from pulumi.runtime.proto import engine_pb2

        severity = {engine_pb2.DEBUG: None, engine_pb2.INFO: "info", engine_pb2.WARNING: "warning",
                    engine_pb2.ERROR: "error"}.get(request.severity)
        if severity is not None:
            self.sink(severity, request.message)


def run(project: Project, stack: str, config: dict[str, str], monitor: Any, log: Any) -> None:
    import pulumi
    import pulumi.runtime
    from pulumi.runtime import settings as runtime_settings

    os.environ["PULUMI_CONFIG"] = json.dumps(config)
    pulumi.runtime.set_all_config(config, [])
    runtime_settings.reset_options(project=project.name, stack=stack, root_directory=str(project.root),
                                   parallel=PARALLEL, preview=False, organization="organization")
    runtime_settings.configure(pulumi.runtime.Settings(
        project=project.name, stack=stack, monitor=monitor, engine=EngineLog(log), parallel=PARALLEL,
        dry_run=False, organization="organization", root_directory=str(project.root)))
    os.chdir(project.root)
    sys.argv = [str(project.main)]
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    executor = ThreadPoolExecutor(max_workers=PARALLEL * 4)
    loop.set_default_executor(executor)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    def program() -> None:
        runpy.run_path(str(project.main), run_name="__main__")

    try:
        loop.run_until_complete(pulumi.runtime.run_in_stack(program))
    except pulumi.RunError as exc:
        raise ProgramError(str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - the language host reports any failure of the program
        raise ProgramError("Program failed with an unhandled exception:\n" + _user_traceback(project)) from exc
    finally:
        executor.shutdown(wait=True)
        loop.close()


def _user_traceback(project: Project) -> str:
    """The traceback from the program's own frames on, as the language host trims it."""
    frames = traceback.extract_tb(sys.exc_info()[2])
    root = str(project.root)
    for index, frame in enumerate(frames):
        if frame.filename.startswith(root) and "site-packages" not in frame.filename:
            return traceback.format_exc(limit=-(len(frames) - index))
    return traceback.format_exc()
