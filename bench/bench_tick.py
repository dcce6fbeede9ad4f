"""Benchmark one scheduled tick: ingest, baselines and every signal's check on one hour of a scenario.

    python bench/bench_tick.py --scenario bench/scenarios/scale_1024.yaml [--hour 2026-11-30T00:00] [--out FILE]

Simulates the scenario (unless --home already holds it), then times each stage on the chosen hour
the way the `detect` job runs it (same functions, same SQL, one fresh warehouse), plus DuckDB's
own `read_json` + INSERT of the same raw files as the reference for ingest speed (ratio: the best
of --repeats interleaved runs of each, so that other load on the machine hits both alike). Peak memory is
the process's max RSS (it includes DuckDB's native memory). Prints a markdown table.
"""

import argparse
import json
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import checks.signals  # noqa: E402,F401
from assets.baselines import series_params
from assets.ingest import SOURCES, ingest_partition  # noqa: E402
from checks.asset_checks import evaluate  # noqa: E402
from checks.registry import REGISTRY  # noqa: E402
from orchestration.progress import Ticker  # noqa: E402
from orchestration.storage import sql  # noqa: E402
from orchestration.storage.raw_zone import RawZoneResource  # noqa: E402
from orchestration.storage.warehouse import WarehouseResource, transaction  # noqa: E402
from simulator import load_scenario, simulate  # noqa: E402


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(rows: list, stage: str, fn):
    t0 = time.perf_counter()
    out = fn()
    rows.append({"stage": stage, "seconds": round(time.perf_counter() - t0, 3), "peak_rss_mib": round(peak_rss_mib())})
    return out


def duckdb_reference(files: list[Path], warehouse: Path) -> float:
    """Seconds for DuckDB's own read_json (schema auto-detected) + INSERT of the same files."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute("DROP TABLE IF EXISTS ref")
        t0 = time.perf_counter()
        con.execute("CREATE TABLE ref AS SELECT * FROM read_json($files, format='newline_delimited')",
                    {"files": [str(f) for f in files]})
        return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--hour", help="UTC hour to tick (default: the scenario's first full hour)")
    parser.add_argument("--home", help="reuse a home that already holds the simulated scenario")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of ours and of the reference for the ingest ratio (best of each; default 3)")
    args = parser.parse_args()

    scenario = load_scenario(Path(args.scenario))
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="goodput-bench-"))
    rows: list[dict] = []
    # A status line on a terminal (stderr) while the stages run; nothing when piped or in CI.
    with Ticker(total=1 + len(SOURCES) + 3 + len(REGISTRY)) as ticker:
        result = _run(args, scenario, home, rows, ticker)
    tick, counts, start = result["tick"], result["counts"], result["start"]
    table = pd.DataFrame(rows)
    print(f"# tick on {args.scenario}, hour {start:%Y-%m-%d %H:00} UTC")
    print(f"machine: {platform.processor() or platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}, duckdb {duckdb.__version__}, rows: {counts}")
    print(table.fillna("").to_markdown(index=False))
    print(f"\ntick total (ingest + baselines + checks): {tick:.1f} s, peak RSS {peak_rss_mib():.0f} MiB")
    if args.out:
        Path(args.out).write_text(json.dumps({"scenario": args.scenario, "hour": str(start), "rows": rows,
                                              "counts": counts, "tick_seconds": tick, "peak_rss_mib": peak_rss_mib()}))
    return 0


def _run(args, scenario, home: Path, rows: list, ticker: Ticker) -> dict:
    ticker.update(f"simulating {scenario.name}")
    if not (home / "raw").exists():
        timed(rows, "simulate (not part of a tick)", lambda: simulate(scenario, home))
    ticker.step()
    start = pd.Timestamp(args.hour) if args.hour else pd.Timestamp(scenario.start).tz_convert("UTC").tz_localize(None)
    end = start + pd.Timedelta(hours=1)
    raw = RawZoneResource(root=str(home / "raw"))
    warehouse = WarehouseResource(path=str(home / "bench.duckdb"))
    counts = {}
    with warehouse.connect() as con:
        for source in SOURCES:
            ticker.update(f"ingest {source.table}")
            ticker.step()
            files = raw.files(source.folder, start)
            if not files:
                continue
            result = timed(rows, f"ingest {source.table}", lambda s=source, f=files: ingest_partition(con, s, f, start, end))
            counts[source.table] = result["rows_loaded"]
            if source.table in ("gpu_samples", "training_steps"):
                # The ratio compares the best of REPEATS runs of each, interleaved, so that load from
                # other work on the machine hits both sides alike (the tick total keeps the first run).
                ours, refs = [rows[-1]["seconds"]], []
                for i in range(args.repeats):
                    ticker.update(f"reference read_json+INSERT {source.table} ({i + 1}/{args.repeats})")
                    refs.append(duckdb_reference(files, home / "reference.duckdb"))
                    if i + 1 < args.repeats:
                        t0 = time.perf_counter()
                        ingest_partition(con, source, files, start, end)
                        ours.append(time.perf_counter() - t0)
                rows.append({"stage": f"  reference read_json+INSERT {source.table}", "seconds": round(min(refs), 3),
                             "peak_rss_mib": round(peak_rss_mib()), "ratio": round(min(refs) / min(ours), 2),
                             "ours_best": round(min(ours), 3)})
                # What an hour with a bad line costs: the line-by-line parse that quarantines it.
                full = timed(rows, f"  line-by-line parse {source.table} (an hour with a bad line)",
                             lambda s=source, f=files: ingest_partition(con, s, f, start, end, fast=False))
                assert full["parse"] == "full"
                rows[-1]["ratio"] = round(min(refs) / rows[-1]["seconds"], 2)
        params = series_params(start.to_pydatetime(), end.to_pydatetime(), 30)
        for name in ("run_minutes", "rank_minutes", "gpu_minutes"):
            ticker.update(f"baseline {name}")
            ticker.step()
            with transaction(con):
                timed(rows, f"baseline {name}", lambda n=name: sql.run(con, f"baselines/{n}", params))
        with transaction(con):   # the runs' first minutes, as the training baselines keep them
            sql.run(con, "baselines/run_starts", params)
        for signal in REGISTRY:
            ticker.update(f"check {signal.name}")
            ticker.step()
            timed(rows, f"check {signal.name}", lambda s=signal: evaluate(con, s, start, end))
    tick = sum(r["seconds"] for r in rows if not r["stage"].startswith(("simulate", "  ")))
    return {"tick": tick, "counts": counts, "start": start}


if __name__ == "__main__":
    sys.exit(main())
