"""`goodput board`: serve the incident board (board/) on loopback, read-only over the home's warehouse.

`goodput ui` starts it beside the Dagster webserver; this command serves it alone.
"""

from __future__ import annotations

import argparse

from orchestration.board_links import DEFAULT_BOARD_PORT
from orchestration.commands.common import use_home


def add_parser(sub) -> None:
    p = sub.add_parser("board", help="serve the incident board (Now, incidents, runs, cluster, endpoints) on loopback")
    add_arguments(p)
    p.set_defaults(func=cmd_board)


def add_arguments(p) -> None:
    p.add_argument("--home", help="GOODPUT_HOME (default: $GOODPUT_HOME or ./.goodput)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=DEFAULT_BOARD_PORT)
    p.add_argument("--dagster-url", default=None,
                   help="the Dagster UI the pages link to (default: the alerting config's dagster_url)")


def serve(home, host: str, port: int, dagster_url: str | None) -> None:
    import uvicorn

    from board.app import create_app

    uvicorn.run(create_app(home, dagster_url), host=host, port=port, log_level="warning", access_log=False)


def _dagster_url() -> str | None:
    from orchestration.alerting.config import AlertingConfigError, load_config, routes_path

    try:
        return load_config(routes_path()).ui_url()
    except AlertingConfigError:
        return None


def cmd_board(args) -> int:
    home = use_home(args.home)
    print(f"Goodput board for {home} on http://{args.host}:{args.port}  (Ctrl-C to stop)", flush=True)
    serve(home, args.host, args.port, args.dagster_url or _dagster_url())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m board", description="serve the Goodput incident board")
    add_arguments(parser)
    return cmd_board(parser.parse_args(argv))
