"""Subcommands of `goodput` that live in their own modules.

Each module here defines `add_parser(sub)` that adds its subcommand(s) to the `goodput` parser and
sets `func` (taking the parsed args, returning an exit status). List the module in `MODULES`.
Expected failures raise `CliError` (one line on stderr, exit 2); it, `use_home` and the other helpers
the subcommands share with orchestration/cli.py are in `common` (never imported from the cli).
"""

import importlib

MODULES: list[str] = [
    "incidents",
    "agent",
    "sql",
    "report",
    "replay",
    "imports",
    "backfill",
    "refold",
    "board",
]


def add_all(sub) -> None:
    for name in MODULES:
        importlib.import_module(f"orchestration.commands.{name}").add_parser(sub)
