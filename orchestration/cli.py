"""The `goodput` command: simulate a cluster, run the demo, score incidents, open the Dagster UI.

Expected problems (a bad scenario, a missing warehouse, a locked file) end with one line on
stderr saying what and what to do, and a non-zero exit; never a bare traceback.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from datetime import timedelta
from pathlib import Path

from orchestration.commands.common import CliError, run_pipeline, say, use_home
from orchestration.progress import Ticker

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCENARIO = REPO_ROOT / "simulator" / "scenarios" / "default.yaml"
DEMO_MARKER = ".goodput-demo"


def cmd_simulate(args) -> int:
    from simulator import ScenarioError, load_scenario, simulate

    try:
        scenario = load_scenario(Path(args.scenario))
    except ScenarioError as error:
        raise CliError(str(error)) from None
    with Ticker() as ticker:  # a live line on a terminal, nothing otherwise
        ticker.update(f"simulating {scenario.name}")
        summary = simulate(scenario, Path(args.out))
    rows = ", ".join(f"{n:,} {k}" for k, n in summary["rows"].items())
    say(f"simulated {scenario.name}: {summary['files']} files ({rows}), {summary['faults']} fault(s) -> {args.out}")
    return 0


def _reset_demo_home(home: Path) -> None:
    marker = home / DEMO_MARKER
    if home.exists() and any(home.iterdir()) and not marker.exists():
        raise CliError(f"{home} holds data that the demo did not write; pass --home to an empty folder")
    from orchestration.config.home import warehouse_path
    from orchestration.storage.warehouse import remove_warehouse

    # the distributed demo's lake settings, lake data and Dagster instance too (issue 21)
    for name in ("raw", "alerts", "reports", "checkpoints", "ground_truth.jsonl", "service.yaml", "lake", "dagster-distributed",
                 "services"):
        target = home / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    if warehouse_path(home).is_dir():
        shutil.rmtree(warehouse_path(home))
    remove_warehouse(warehouse_path(home))   # the demo's own warehouse, its WAL and its marker
    home.mkdir(parents=True, exist_ok=True)
    marker.write_text("This folder is a Goodput demo home; `goodput demo` may reset it.\n")


def _print_incidents(incidents) -> None:
    if incidents.empty:
        say("  (no incidents)")
        return
    for r in incidents.itertuples():
        say(f"  {r.incident_id}  [{r.tier}] {r.status:<8} {r.title}")
        say(f"      onset {r.onset}  opened {r.opened}  last seen {r.last_seen}  "
             f"GPUs {', '.join(r.gpus)}  checkpoint {r.checkpoint}  {r.gpu_hours_at_risk:.2f} GPU-h at risk  owner {r.owner}")


def _print_score(table) -> None:
    from tabulate import tabulate

    headers = ["fault", "injected", "detected", "missed", "false alarms", "precision", "recall", "delay p50", "delay p95"]
    rows = [[r.fault_type, r.injected, r.detected, r.missed, r.false_alarms, f"{r.precision:.2f}", f"{r.recall:.2f}",
             _secs(r.delay_median_s), _secs(r.delay_p95_s)] for r in table.itertuples()]
    text = tabulate(rows, headers=headers, tablefmt="plain", disable_numparse=True, colalign=["left"] + ["right"] * 8)
    say("\n".join(f"  {line}" for line in text.splitlines()))


def _secs(value: float) -> str:
    return "-" if value != value else f"{value / 60:.1f} min"


def write_demo_shards(home: Path, host_names: tuple[str, ...], count: int) -> None:
    """`goodput demo --shards N`: the scenario's hosts in N groups of neighbours, as `shards:` in service.yaml."""
    import yaml

    if not 1 <= count <= len(host_names):
        raise CliError(f"--shards {count}: the scenario has {len(host_names)} host(s); pass 1 to {len(host_names)}")
    size, extra = divmod(len(host_names), count)
    groups, first = [], 0
    for i in range(count):
        groups.append(list(host_names[first:first + size + (i < extra)]))
        first += len(groups[-1])
    shards = [{"name": f"shard-{i}", "hosts": group} for i, group in enumerate(groups, start=1)]
    (home / "service.yaml").write_text(yaml.safe_dump({"shards": shards}, sort_keys=False))


def cmd_demo(args) -> int:
    from orchestration.config.home import goodput_home
    from orchestration.evaluation.scoring import load_truth, opened_incidents, score
    from simulator import load_scenario, simulate

    started = time.monotonic()
    _reset_demo_home(Path(args.home).resolve() if args.home else goodput_home())
    home = use_home(args.home)
    scenario = load_scenario(Path(args.scenario))
    with Ticker() as ticker:
        ticker.update(f"1/3 simulating {scenario.name}")
        summary = simulate(scenario, home)
    say(f"1/3 simulated {scenario.name}: {summary['files']} raw files, "
         + ", ".join(f"{n:,} {k}" for k, n in summary["rows"].items()) + f", {summary['faults']} injected fault(s)")
    if args.shards:   # issue 21: each hour's per-host work in partitions of hour x shard (docs/deploy.md)
        write_demo_shards(home, scenario.cluster.host_names, args.shards)
        say(f"    {args.shards} shard(s) of hosts in {home / 'service.yaml'}")
    end = min(scenario.end, scenario.start + timedelta(hours=args.hours)) if args.hours else scenario.end
    if args.deployment == "distributed":   # issue 21: PostgreSQL, Redis, Celery workers (docs/deploy.md)
        from orchestration.commands.distributed import demo_distributed

        incidents, counts = demo_distributed(home, scenario.start, end, args, say)
    else:
        say(f"2/3 processing {scenario.start:%Y-%m-%d %H:%M} .. {end:%H:%M} UTC through the Dagster definitions")
        run_pipeline(home, scenario.start, end)
        incidents, counts = opened_incidents(home)
    say("3/3 done. Rows ingested: " + ", ".join(f"{n:,} {k}" for k, n in counts.items()))
    say(f"\nIncidents ({len(incidents)}):")
    _print_incidents(incidents)
    table = score(load_truth(home / "ground_truth.jsonl"), incidents)
    say("\nScore against ground truth:")
    _print_score(table)
    alerts = home / "alerts" / "alerts.jsonl"
    say(f"\nAlerts delivered to {alerts}")
    goodput = "goodput" if shutil.which("goodput") else sys.argv[0]
    say(f"Demo finished in {time.monotonic() - started:.0f}s. Browse it all with:  {goodput} ui --home {home}")
    if args.deployment != "distributed":
        say(f"Query it read-only from Python:  duckdb.connect('{home / 'warehouse.duckdb'}', read_only=True)")
    return 0


def cmd_score(args) -> int:
    from orchestration.evaluation.scoring import load_truth, opened_incidents, score

    home = use_home(args.home)
    truth_path = Path(args.truth) if args.truth else home / "ground_truth.jsonl"
    if not truth_path.exists():
        raise CliError(f"no ground truth at {truth_path}: pass --truth FILE (written by `goodput simulate`)")
    incidents, _ = opened_incidents(home)
    _print_score(score(load_truth(truth_path), incidents))
    return 0


def cmd_ui(args) -> int:
    home = use_home(args.home)
    # links in check metadata and alerts open the incident board unless GOODPUT_BOARD_URL says otherwise
    board_url = f"http://{args.host}:{args.board_port}"
    os.environ.setdefault("GOODPUT_BOARD_URL", board_url)
    say(f"Incident board for {home} on {board_url}")
    say(f"Dagster UI for {home} on http://{args.host}:{args.port}  (Ctrl-C to stop)")
    # the webserver, the daemon, one code server and the board (not `dagster dev`: its proxy code
    # server and one-second polls cost more than the whole idle budget, orchestration/service/ui.py),
    # watched by a fresh process that imports no Dagster (this one holds ~200 MB of it)
    command = [sys.executable, "-m", "orchestration.service.ui", str(home), args.host, str(args.port),
               str(args.board_port), str(REPO_ROOT)]
    os.execvpe(command[0], command, os.environ)
    return 0


def cmd_signals(args) -> int:
    import checks.signals  # noqa: F401
    from checks.registry import signal_table

    say(signal_table())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="goodput", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("simulate", help="write a simulated cluster's raw zone and ground truth")
    p.add_argument("--scenario", required=True, help="scenario file (YAML or JSON), see docs/scenario.md")
    p.add_argument("--out", required=True, help="output folder (a GOODPUT_HOME: raw/ and ground_truth.jsonl)")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("demo", help="simulate the default scenario, process it, print incidents and score")
    p.add_argument("--home", help="GOODPUT_HOME for the demo (default: $GOODPUT_HOME or ./.goodput)")
    p.add_argument("--scenario", default=str(DEFAULT_SCENARIO), help="scenario file (default: the embedded one)")
    p.add_argument("--hours", type=int, help="process only the scenario's first HOURS hours")
    p.add_argument("--shards", type=int, help="split the scenario's hosts into SHARDS host groups: each hour's per-host "
                                              "work runs per hour and shard (docs/deploy.md, \"Shards\")")
    from orchestration.commands.distributed import add_demo_arguments

    add_demo_arguments(p)   # --deployment distributed and its services (issue 21)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("score", help="score the home's incidents against a ground-truth file")
    p.add_argument("--home")
    p.add_argument("--truth", help="ground_truth.jsonl (default: the home's)")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("signals", help="print the signal registry as a markdown table")
    p.set_defaults(func=cmd_signals)

    p = sub.add_parser("ui", help="start the Dagster UI (dagster dev) and the incident board on the home")
    p.add_argument("--home")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3000)
    p.add_argument("--board-port", type=int, default=3001, help="the incident board's port (default 3001)")
    p.set_defaults(func=cmd_ui)

    from orchestration.commands import add_all

    add_all(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from orchestration.progress import announce_waits

    announce_waits()   # a wait longer than 2 s says what it waits for on stderr, piped or not
    from orchestration.config.home import InstanceDamaged
    from orchestration.storage.warehouse_open import WarehouseBusy, WarehouseDamaged, WarehouseMissing

    try:
        return args.func(args)
    except (CliError, WarehouseBusy, WarehouseMissing, WarehouseDamaged, InstanceDamaged, FileNotFoundError) as error:
        print(f"goodput: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `goodput ... | head`: the reader has what it wanted
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
