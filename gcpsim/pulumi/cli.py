"""The `pulumi` command line of the stand-in: the commands and flags the Automation API issues
(pulumi/automation/_cmd.py, _local_workspace.py, _stack.py) and the ones a user types for the
same work. A flag it does not implement is refused (exit 2) rather than ignored, so nothing
silently behaves otherwise than the CLI would. Errors exit 255 with the CLI's message on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from importlib import metadata
from pathlib import Path

from gcpsim.pulumi import commands
from gcpsim.pulumi.backend import Backend, BackendError, backend_dir
from gcpsim.pulumi.plugins import PackageFactory
from gcpsim.pulumi.project import Project, ProjectError, load

USAGE_ERROR = 2
FAILED = 255
# Flags of every command (cobra's persistent flags) that change nothing here.
GLOBAL_SWITCHES = {"--non-interactive", "--logflow", "--logtostderr", "--disable-integrity-checking",
                   "--emoji", "--fully-qualify-stack-names", "--profiling", "--debug", "-d"}
GLOBAL_VALUES = {"--color", "--verbose", "-v", "--tracing", "--memprofilerate"}


class Usage(Exception):
    """A command or flag the stand-in does not take (exit 2)."""


def version() -> str:
    """The SDK's own version: the Automation API checks the CLI against it."""
    return "v" + metadata.version("pulumi")


def _split_globals(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    rest: list[str] = []
    found: dict[str, str] = {}
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if arg == "--":
            rest.append(arg)
            rest.extend(args)
            break
        if name in GLOBAL_SWITCHES:
            continue
        if name in GLOBAL_VALUES:
            found[name] = value if eq else next(args, "")
        elif name in ("--stack", "-s", "--cwd", "-C"):
            found[name.lstrip("-")[:1] if len(name) == 2 else name.lstrip("-")] = value if eq else next(args, "")
        else:
            rest.append(arg)
    return rest, found


def _parser(prog: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=prog, add_help=False, allow_abbrev=False)


def _parse(parser: argparse.ArgumentParser, args: list[str]) -> argparse.Namespace:
    parsed, unknown = parser.parse_known_args(args)
    if unknown:
        raise Usage(f"unknown flag or argument for `{parser.prog}`: {' '.join(unknown)} "
                    "(not implemented by the simulator's pulumi)")
    return parsed


def _update_parser(prog: str) -> argparse.ArgumentParser:
    p = _parser(prog)
    for switch in ("--yes", "-y", "--skip-preview", "-f", "--refresh", "--diff", "--suppress-outputs",
                   "--suppress-progress", "--show-secrets", "--show-config", "--show-replacement-steps",
                   "--show-sames", "--show-reads", "--json", "-j"):
        p.add_argument(switch, action="store_true")
    for option in ("--exec-kind", "--message", "-m", "--parallel", "-p", "--config-file", "--exec-agent"):
        p.add_argument(option)
    p.add_argument("--policy-pack", action="append", default=[])
    p.add_argument("--run-program")
    return p


def run(argv: list[str], factories: dict[str, PackageFactory]) -> int:
    args, flags = _split_globals(argv)
    if flags.get("C") or flags.get("cwd"):
        os.chdir(flags.get("C") or flags["cwd"])
    if args == ["version"]:
        print(version())
        return 0
    if not args:
        raise Usage("a command is required: the simulator's pulumi implements version, whoami, "
                    "stack, config, up, destroy and refresh")
    command, rest = args[0], args[1:]
    if command == "whoami":
        p = _parser("pulumi whoami")
        p.add_argument("--json", "-j", action="store_true")
        parsed = _parse(p, rest)
        commands.whoami(f"file://{backend_dir(os.environ)}", parsed.json)
        return 0
    project = _project()
    backend = Backend(backend_dir(os.environ), project.name)
    stack = flags.get("s") or flags.get("stack")
    if command == "stack":
        return _stack_command(project, backend, rest, stack)
    if command == "config":
        return _config_command(project, rest, stack)
    if command in ("up", "update", "destroy", "refresh"):
        return _operation(command, project, backend, rest, stack, factories)
    raise Usage(f"`pulumi {command}` is not implemented by the simulator's pulumi")


def _project() -> Project:
    here = Path.cwd()
    for directory in (here, *here.parents):
        if (directory / "Pulumi.yaml").is_file() or (directory / "Pulumi.yml").is_file():
            return load(directory)
    return load(here)


def _stack_command(project: Project, backend: Backend, rest: list[str], stack: str | None) -> int:
    sub = rest[0] if rest and not rest[0].startswith("-") else ""
    p = _parser(f"pulumi stack {sub}".strip())
    p.add_argument("name", nargs="?")
    for switch in ("--json", "-j", "--show-secrets", "--yes", "-y", "--force", "-f", "--preserve-config",
                   "--create", "-c", "--no-select", "--all", "-a", "--remove-backups"):
        p.add_argument(switch, action="store_true")
    for option in ("--secrets-provider", "--page-size", "--page", "--file"):
        p.add_argument(option)
    parsed = _parse(p, rest[1:] if sub else rest)
    name = parsed.name or stack
    if sub == "init":
        backend.create(commands.require_stack(project, name))
        if not parsed.no_select:
            commands.select(project, name)
        print(f"Created stack '{name}'")
    elif sub == "select":
        chosen = commands.require_stack(project, name)
        if parsed.create and not backend.exists(chosen):
            backend.create(chosen)
        backend.require(chosen)
        commands.select(project, chosen)
    elif sub == "rm":
        chosen = commands.require_stack(project, name)
        if not parsed.yes:
            raise BackendError("--yes must be passed in to proceed when running in non-interactive mode")
        backend.remove(chosen, parsed.force)
        if not parsed.preserve_config:
            commands.remove_config_file(project, chosen)
        if commands.current_stack(project) == chosen:
            commands.select(project, None)
        print(f"Stack '{chosen}' has been removed!")
    elif sub in ("ls", "list"):
        commands.print_stacks(project, backend)
    elif sub == "output":
        commands.print_outputs(backend, commands.require_stack(project, stack), parsed.show_secrets, parsed.name)
    elif sub == "history":
        commands.print_history(backend, commands.require_stack(project, stack),
                               int(parsed.page_size or 0), int(parsed.page or 1))
    elif sub == "export":
        commands.export(backend, commands.require_stack(project, stack), parsed.show_secrets)
    elif sub == "":
        backend.require(commands.require_stack(project, name))
        print(f"Current stack is {commands.require_stack(project, name)}:")
    else:
        raise Usage(f"`pulumi stack {sub}` is not implemented by the simulator's pulumi")
    return 0


def _config_command(project: Project, rest: list[str], stack: str | None) -> int:
    sub = rest[0] if rest and not rest[0].startswith("-") else ""
    if sub not in ("", "get"):
        raise Usage(f"`pulumi config {sub}` is not implemented by the simulator's pulumi "
                    "(edit the stack's Pulumi.<stack>.yaml instead)")
    p = _parser(f"pulumi config {sub}".strip())
    p.add_argument("key", nargs="?")
    for switch in ("--json", "-j", "--show-secrets", "--path"):
        p.add_argument(switch, action="store_true")
    parsed = _parse(p, rest[1:] if sub else rest)
    commands.print_config(project, commands.require_stack(project, stack), parsed.key if sub else None)
    return 0


def _operation(command: str, project: Project, backend: Backend, rest: list[str], stack: str | None,
               factories: dict[str, PackageFactory]) -> int:
    from gcpsim.pulumi import operations

    parsed = _parse(_update_parser(f"pulumi {command}"), rest)
    if not (parsed.yes or parsed.y) or not (parsed.skip_preview or parsed.f):
        raise Usage(f"--yes and --skip-preview must be passed to `pulumi {command}` when running in "
                    "non-interactive mode (the simulator's pulumi shows no preview)")
    if parsed.run_program not in (None, "true") or parsed.json or parsed.config_file:
        raise Usage("--run-program=false, --json and --config-file are not implemented by the simulator's pulumi")
    update = operations.Update(project=project, backend=backend, stack=commands.require_stack(project, stack),
                               factories=factories, version=version(), message=parsed.message or parsed.m or "",
                               exec_kind=parsed.exec_kind or "cli")
    if command in ("up", "update"):
        packs = [Path(p).resolve() for p in parsed.policy_pack]
        return operations.up(update, refresh=parsed.refresh, policy_packs=packs)
    if parsed.policy_pack:
        raise Usage(f"--policy-pack does not apply to `pulumi {command}`")
    if command == "destroy":
        return operations.destroy(update, refresh=parsed.refresh)
    return operations.refresh(update)


PACKAGES_ENV = "TRAINCTL_SIM_PULUMI_PACKAGES"


def served_packages() -> dict[str, PackageFactory]:
    """The provider packages the stand-in serves: the GCP stand-in's, or the table that
    $TRAINCTL_SIM_PULUMI_PACKAGES names as `module:attribute` (the engine's own tests serve a
    fake provider so, as Pulumi finds whichever provider plugins are installed)."""
    named = os.environ.get(PACKAGES_ENV)
    if not named:
        from gcpsim.pulumi.gcp import PACKAGES

        return PACKAGES
    module, _, attribute = named.partition(":")
    return getattr(importlib.import_module(module), attribute)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None, factories: dict[str, PackageFactory] | None = None) -> int:
    if factories is None:
        factories = served_packages()
    try:
        return run(list(sys.argv[1:] if argv is None else argv), factories)
    except Usage as exc:
        sys.stderr.write(f"error: {exc}\n")
        return USAGE_ERROR
    except (BackendError, ProjectError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return FAILED
