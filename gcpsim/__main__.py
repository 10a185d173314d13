"""python -m gcpsim serve --home DIR --port N [--api-only]"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()
    serve(args.home, args.port, api_only=args.api_only, idle_seconds=args.idle_seconds)


if __name__ == "__main__":
    main()
