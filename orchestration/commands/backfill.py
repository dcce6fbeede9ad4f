"""`goodput backfill`: process hours of the raw zone that are already there (an import of old logs,
a raw zone copied from elsewhere), oldest hour first, then fold incidents and deliver the alerts.

    goodput backfill --hours-with-data [--home DIR] [--no-alerts] [--submit]
    goodput backfill --from 2026-11-30T00:00Z --to 2026-11-30T06:00Z [--home DIR]

By default the hours run in this process, through the same loop as `goodput demo` (`run_pipeline`:
each hour's `detect` job on the home's Dagster instance, so every run shows in `goodput ui`, with a
progress line), then `fold_incidents`, then the alert sensor's delivery. `--no-alerts` folds
without paging anyone about history: the backfilled hours' pending transitions are journaled as
`suppressed` for every sink they route to, so the alert sensor never sends them either.

`--submit` instead records a Dagster asset backfill of the hours on the home's instance (it shows
under Overview > Backfills in `goodput ui`); the daemon of `goodput ui` runs it, each hour's ingest
and baselines after the previous hour's (the baselines' lookback depends on it). Once the backfill
is done, the `goodput_service` sensor folds the incidents once and delivers the alerts.

Raw hours that appear without ever being processed are noticed by the raw-zone sensor (see
docs/sources.md); this command is the way to run them by hand, all at once.
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from orchestration.commands.common import CliError, run_pipeline, use_home

HOUR_FOLDER = re.compile(r"^\d{4}-\d{2}-\d{2}$")
EARLIEST_PARTITION = datetime(2025, 1, 1, tzinfo=timezone.utc)   # orchestration.partitions.hourly's start


def hours_with_data(home: Path) -> list[datetime]:
    """Every UTC hour that has a raw file, from the raw zone's `<source>/<day>/<hour>/` folders."""
    hours = set()
    for day in (home / "raw").glob("*/*"):
        if not HOUR_FOLDER.match(day.name) or not day.is_dir():
            continue
        for hour in day.iterdir():
            if hour.name.isdigit() and any(hour.glob("*.jsonl")):
                hours.add(datetime.strptime(f"{day.name} {hour.name}", "%Y-%m-%d %H").replace(tzinfo=timezone.utc))
    return sorted(hours)


def _parse(text: str, flag: str) -> datetime:
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"{flag} {text!r}: expected an ISO-8601 time, e.g. 2026-11-30T03:00Z") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def chosen_hours(args, home: Path) -> list[datetime]:
    if args.hours_with_data:
        if args.start or args.end:
            raise CliError("pass either --hours-with-data or --from/--to, not both")
        hours = hours_with_data(home)
        if not hours:
            raise CliError(f"no raw files under {home / 'raw'}: import logs first (goodput import ...)")
    else:
        if not (args.start and args.end):
            raise CliError("pass --from START --to END (ISO-8601 UTC) or --hours-with-data")
        start, end = _parse(args.start, "--from"), _parse(args.end, "--to")
        if end <= start:
            raise CliError("--to must be after --from")
        first = start.replace(minute=0, second=0, microsecond=0)
        hours = [first + timedelta(hours=i) for i in range(int((end - first) / timedelta(hours=1) + 0.999999))]
    now = datetime.now(timezone.utc)
    outside = [h for h in hours if h < EARLIEST_PARTITION or h > now]
    if outside:
        raise CliError(f"{len(outside)} hour(s) outside the partitions ({EARLIEST_PARTITION:%Y-%m-%d} .. now), "
                       f"e.g. {outside[0]:%Y-%m-%d %H}:00; check the imported logs' times (--start-time)")
    return hours


def _keys(hours: list[datetime]) -> list[str]:
    from orchestration.partitions import HOUR_KEY

    return [h.strftime(HOUR_KEY) for h in hours]


def suppress_history(home: Path, until: datetime) -> int:
    """Journal every pending notification before `until` as `suppressed` for each sink it routes to
    (grouped per event as the sinks would get them: orchestration/alerting/grouping.py)."""
    from orchestration.alerting.grouping import notifications
    from orchestration.alerting.journal import finished
    from orchestration.alerting.payloads import dedup_key
    from orchestration.definitions import resources_for
    from orchestration.sensors.alerts import incident_transitions

    resources = resources_for(home)
    alerting, config = resources["alerting"], resources["alerting"].config()
    journal = alerting.journal()
    done = finished(journal.attempts())
    alerts = incident_transitions(resources["warehouse"])
    suppressed: set[str] = set()
    for sink in config.sinks:
        grouped, _held = notifications([a for a in alerts if sink in config.route(a)], config.grouping, float("inf"))
        for note in grouped:
            if (note.get("transition_at") or "") >= until.isoformat() or (sink, dedup_key(note)) in done:
                continue
            journal.record({"attempt_id": uuid.uuid4().hex, "sink": sink, "dedup_key": dedup_key(note),
                            "incident_id": note["incident_id"], "transition": note["transition"], "attempt": 0,
                            "attempted_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                            "outcome": "suppressed", "status_code": None,
                            "error": "goodput backfill --no-alerts: history, not delivered", "elapsed_seconds": 0.0})
            suppressed.add(dedup_key(note))
    return len(suppressed)


def submit(home: Path, keys: list[str]) -> str:
    """Record a Dagster asset backfill of the detect assets for `keys` (the fold follows it: goodput_service)."""
    import dagster as dg
    from dagster._core.execution.backfill import PartitionBackfill
    from dagster._core.utils import make_new_backfill_id

    from orchestration.definitions import build_definitions
    from orchestration.jobs import detect_job

    defs = build_definitions(home)
    graph = defs.resolve_asset_graph()
    selection = detect_job.selection.resolve(graph)
    instance = dg.DagsterInstance.get()
    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=make_new_backfill_id(), asset_graph=graph, partition_names=keys, asset_selection=sorted(selection),
        backfill_timestamp=time.time(), tags={"goodput/backfill": "history"}, dynamic_partitions_store=instance,
        all_partitions=False, title=f"goodput backfill {keys[0]} .. {keys[-1]}",
        description=f"{len(keys)} hour(s) of the raw zone; the incidents fold follows it", run_config=None)
    instance.add_backfill(backfill)
    return backfill.backfill_id


def cmd_backfill(args) -> int:
    home = use_home(args.home)
    hours = chosen_hours(args, home)
    keys = _keys(hours)
    span = f"{len(keys)} hour(s), {keys[0]} .. {keys[-1]}"
    if args.submit:
        if args.no_alerts:
            raise CliError("--no-alerts works in process only (a submitted backfill's alerts go out as its runs finish)")
        backfill_id = submit(home, keys)
        print(f"submitted Dagster backfill {backfill_id}: {span}; `goodput ui --home {home}` runs it (Overview > Backfills)")
        return 0
    print(f"backfilling {span} in process", flush=True)
    started, cpu = time.monotonic(), time.process_time()
    run_pipeline(home, hours[0], hours[-1] + timedelta(hours=1), keys=keys, alerts=not args.no_alerts)
    note = ""
    if args.no_alerts:
        note = f"; {suppress_history(home, hours[-1] + timedelta(hours=1))} historical transition(s) suppressed, not delivered"
    print(f"backfilled {span} in {time.monotonic() - started:.0f} s (CPU {time.process_time() - cpu:.0f} s){note}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("backfill", help="process raw hours already in the home (imported history), then fold and alert",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--from", dest="start", help="first hour (ISO-8601 UTC)")
    p.add_argument("--to", dest="end", help="end of the range (exclusive)")
    p.add_argument("--hours-with-data", action="store_true", help="every hour that has raw files")
    p.add_argument("--home")
    p.add_argument("--no-alerts", action="store_true", help="fold incidents but deliver no alert for the backfilled hours")
    p.add_argument("--submit", action="store_true", help="submit as a Dagster backfill for `goodput ui`'s daemon to run")
    p.set_defaults(func=cmd_backfill)
