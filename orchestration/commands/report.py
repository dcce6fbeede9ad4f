"""`goodput report RUN_ID`: the incident board's run page, saved as one self-contained HTML file.

The file holds everything (plotly.js inline, the figures' data), so it opens anywhere without the
board or a network: interactive loss, step time and grad norm with incident windows shaded, step
time per rank, the GPUs' heatmaps, goodput, checkpoints, restarts, and each incident's restart
point, in readable tables with units. Links to incidents open the board (GOODPUT_BOARD_URL). It
reads the warehouse read-only (waiting politely while a run writes) and writes
`GOODPUT_HOME/reports/<run_id>.html` (or `--out`), atomically, readable by the group.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import duckdb

from orchestration.commands.common import CliError, use_home

FILE_MODE = 0o644   # a report is for sharing: the owner writes, the group (and others) read


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="save the board's run page for one training run as one self-contained HTML file")
    p.add_argument("run_id", help="the run id (see: goodput sql \"SELECT run_id FROM runs\")")
    p.add_argument("--home", help="GOODPUT_HOME (default: $GOODPUT_HOME or ./.goodput)")
    p.add_argument("--out", help="the file (NAME.html) or folder to write (default: GOODPUT_HOME/reports/<run_id>.html)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait while a run holds the write lock")
    p.set_defaults(func=cmd_report)


def target(out: str | None, home: Path, run_id: str) -> Path:
    if out is None:
        return home / "reports" / f"{run_id}.html"
    path = Path(out)
    return path if path.suffix.lower() in (".html", ".htm") else path / f"{run_id}.html"


def write(path: Path, text: str) -> None:
    """Replace `path` atomically (a reader sees the old file or the new one), mode 0644."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_report(args) -> int:
    from board.app import Board
    from orchestration.board_links import board_url
    from orchestration.config.home import warehouse_path
    from orchestration.storage.warehouse import WarehouseBusy, warehouse_for

    home = use_home(args.home)
    warehouse = warehouse_for(home)
    try:
        with warehouse.connect(read_only=True, wait_seconds=max(args.timeout, 0.0)) as con:
            try:
                known = [r for (r,) in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
            except duckdb.CatalogException:
                raise CliError(f"{warehouse_path(home)} has no analyst views yet: they are created by the next write "
                               "(a run, or `goodput demo`)") from None
    except WarehouseBusy:
        raise CliError(f"the warehouse {warehouse_path(home)} stayed locked by a writing run for {args.timeout:g}s; "
                       "try again, or pass a longer --timeout") from None
    if args.run_id not in known:
        listed = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
        raise CliError(f"no run {args.run_id!r} in {warehouse_path(home)}; known runs: {listed or 'none'}")
    # links in the saved page open the live board
    board = Board(home, dagster_url=None, root=board_url().rstrip("/"), wait_seconds=max(args.timeout, 0.0))
    status, page = board.run_page(args.run_id, inline_plotly=True)
    if status != 200:
        raise CliError(f"could not read run {args.run_id!r} from {warehouse_path(home)} (HTTP-like status {status}); try again")
    path = target(args.out, home, args.run_id)
    write(path, page)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, self-contained: open it in a browser)")
    return 0
