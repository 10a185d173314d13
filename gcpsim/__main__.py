"""python -m gcpsim serve --home DIR --port N [--api-only] | ensure --home DIR [--api-only] | release --home DIR"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gcpsim.daemon import IDLE_SECONDS, serve


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m gcpsim")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="serve the simulated cloud kept in --home")
    run.add_argument("--home", type=Path, required=True)
    run.add_argument("--port", type=int, required=True)
    run.add_argument("--api-only", action="store_true", help="no machines behind VMs (no root needed)")
    run.add_argument("--idle-seconds", type=float, default=IDLE_SECONDS)
    ensure = sub.add_parser("ensure", help="start the simulator if it is not running; print how to reach it")
    ensure.add_argument("--home", type=Path, required=True)
    ensure.add_argument("--api-only", action="store_true")
    release = sub.add_parser("release", help="let the simulator leave now if nothing of it is alive")
    release.add_argument("--home", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.home, args.port, api_only=args.api_only, idle_seconds=args.idle_seconds)
        return
    from gcpsim import endpoints

    if args.command == "ensure":
        print(json.dumps(endpoints.ensure(args.home, api_only=args.api_only)))
    else:
        endpoints.release(args.home)


if __name__ == "__main__":
    main()
