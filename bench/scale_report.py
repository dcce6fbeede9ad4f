"""The tables of bench/bench_distributed_scale.py from its measurements (its `--out` JSON): the runs, the
2-worker/1-worker and lake/file ratios, the per-1,024-GPU (per-shard) costs, and the projection to 16,384
and 100,000 GPUs with its arithmetic. `python bench/bench_distributed_scale.py --from-json FILE` reprints them.
"""

from __future__ import annotations

import math
import statistics

import pandas as pd

SHARD = 1024
GROUPS = ("ingest", "baselines", "checkpoints", "checks")
PROJECTED = (16_384, 100_000)
RUNS = ("first", "again")   # again: the hour's files unchanged, so nothing to ingest (baselines and checks rerun)


def _md(rows: list[dict]) -> str:
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True) if rows else "(nothing measured)"


def _pct(values: list[float], q: float) -> float:
    return float(pd.Series(values).quantile(q)) if values else float("nan")


def _run_rows(homes: list[dict]) -> list[dict]:
    rows = []
    for h in homes:
        for i, r in enumerate(h["runs"], 1):
            row = {"home": h["label"], "run": RUNS[i - 1], "wall s": f"{r['wall_s']:.1f}",
                   "CPU-s (tree)": f"{r['cpu_s']:.1f}", "PostgreSQL + Redis CPU-s": f"{r['services_cpu_s']:.1f}"}
            if "celery" in r:
                dispatch = [s["dispatch_s"] for s in r["celery"]]
                own = [s["step_s"] for s in r["celery"]]
                row["steps"] = str(len(own))
                row["dispatch p50 / p90 / max s"] = f"{_pct(dispatch, .5):.2f} / {_pct(dispatch, .9):.2f} / {max(dispatch):.2f}"
                row["step p50 / p90 / max s"] = f"{_pct(own, .5):.2f} / {_pct(own, .9):.2f} / {max(own):.2f}"
                row["dispatch / step sum s"] = f"{sum(dispatch):.0f} / {sum(own):.0f}"
            else:
                row["step wall sum s"] = f"{sum(s['wall_s'] for s in r['steps']):.1f}"
            row["stored MiB"] = f"{r['stored_bytes'] / 2**20:,.0f}"
            row["step retries"] = str(r.get("step_retries", 0))
            row["load"] = f"{r['load']:.1f}"
            row["whole process: wall s / CPU-s / peak RSS MiB"] = ""
            rows.append(row)
        rows[-1]["whole process: wall s / CPU-s / peak RSS MiB"] = (f"{h['process_wall_s']:.0f} / {h['tree_cpu_s']:.0f} / "
                                                                     f"{h['peak_rss_mib']:,}")
    return rows


def _with_services(run: dict) -> float:
    return run["cpu_s"] + run["services_cpu_s"]


def _ratios(homes: list[dict], a: str, b: str, name: str) -> list[dict]:
    """b over a, per repeat (the homes measured side by side) and run, for wall and CPU."""
    rows = []
    by_label = {h["label"]: h for h in homes}
    for repeat in sorted({h["label"].rsplit("-r", 1)[1] for h in homes}):
        ha, hb = by_label.get(f"{a}-r{repeat}"), by_label.get(f"{b}-r{repeat}")
        if not (ha and hb):
            continue
        for i, (ra, rb) in enumerate(zip(ha["runs"], hb["runs"]), 1):
            rows.append({"repeat": repeat, "run": RUNS[i - 1], f"wall {name}": f"{rb['wall_s'] / ra['wall_s']:.2f}",
                         f"CPU {name}": f"{rb['cpu_s'] / ra['cpu_s']:.2f}",
                         f"CPU incl. PostgreSQL + Redis {name}": f"{_with_services(rb) / _with_services(ra):.2f}"})
    for run in RUNS:   # the median of each column over the repeats, per run
        mine = [r for r in rows if r["run"] == run and r["repeat"] != "median"]
        if len(mine) > 1:
            rows.append({"repeat": "median", "run": run, **{c: f"{statistics.median(float(r[c]) for r in mine):.2f}"
                                                           for c in mine[0] if c not in ("repeat", "run")}})
    return rows


def _groups(homes: list[dict], gpus: int) -> list[dict]:
    rows = []
    for h in homes:
        if not all("cpu_s" in s for r in h["runs"] for s in r["steps"]):
            continue   # two workers: steps overlap, no per-step CPU
        for i, r in enumerate(h["runs"], 1):
            row = {"home": h["label"], "run": RUNS[i - 1]}
            for g in GROUPS:
                cpu = sum(s["cpu_s"] for s in r["steps"] if s["group"] == g)
                row[f"{g} CPU-s (per 1,024)"] = f"{cpu:.1f} ({cpu * SHARD / gpus:.1f})"
            steps = sum(s["cpu_s"] for s in r["steps"])
            row["all steps (per 1,024)"] = f"{steps:.1f} ({steps * SHARD / gpus:.1f})"
            row["run CPU-s outside steps"] = f"{r['cpu_s'] - steps:.1f}"
            rows.append(row)
    return rows


def _median(homes: list[dict], kind: str, run: int, field, workers: int | None = None) -> float | None:
    values = [field(h["runs"][run]) for h in homes if h["kind"] == kind and (workers is None or h.get("workers") == workers)]
    return statistics.median(values) if values else None


def per_shard(data: dict) -> dict:
    """The per-1,024-GPU figures the projection uses, medians over the repeats of the 1-worker distributed
    homes: `first` the run that ingests the hour, `again` the one that finds nothing new to ingest."""
    homes, k = data["homes"], data["gpus"] / SHARD
    out: dict = {"k": k, "raw_bytes_hour": data["raw"]["raw_bytes"] / k}
    for i, run in enumerate(RUNS):
        def med(field, kind: str = "distributed", i: int = i) -> float | None:
            return _median(homes, kind, i, field, workers=1 if kind == "distributed" else None)

        d1 = med(lambda r: r["cpu_s"])
        if d1 is None:
            return out
        lake, file_ = med(lambda r: r["cpu_s"], "lake"), med(lambda r: r["cpu_s"], "file")
        out[run] = {"cpu_shard": d1 / k, "services_cpu_run": med(lambda r: r["services_cpu_s"]),
                    "events_run": med(lambda r: r.get("events", 0)), "stored_bytes": med(lambda r: r["stored_bytes"]),
                    "celery_overhead_run": None if lake is None else d1 - lake,
                    "lake_cpu_shard": None if lake is None else lake / k, "file_cpu_shard": None if file_ is None else file_ / k,
                    "ingest_cpu_shard": med(lambda r: sum(s.get("cpu_s", 0) for s in r["steps"] if s["group"] == "ingest")) / k}
        for name in ("snapshots", "data_files", "delete_files", "rows_inserted", "commits", "catalog_bytes"):
            out[run][name] = med(lambda r, name=name: r["catalog"].get(name, float("nan")))
    return out


def _cadence_rows(shard: dict, n: int) -> list[dict]:
    """For n GPUs: one detect per shard-hour, and the live service's one per shard per minute."""
    s, first, again, nan = math.ceil(n / SHARD), shard["first"], shard["again"], float("nan")
    rows = []
    for cadence, runs, run in (("hourly", 1, first), ("live", 60, again)):
        low = s * (first["cpu_shard"] if runs == 1 else runs * again["cpu_shard"] + first["ingest_cpu_shard"])
        high = low + s * runs * max(run["celery_overhead_run"] or 0.0, 0.0)
        extra = run["stored_bytes"] - first["stored_bytes"] if runs > 1 else 0
        rows.append({
            "GPUs": f"{n:,}", "shards": str(s), "detect runs": f"{cadence}: {runs} per shard-hour",
            "CPU-s per hour (low - high)": f"{low:,.0f} - {high:,.0f}",
            "cores = workers (low - high)": f"{math.ceil(low / 3600)} - {math.ceil(high / 3600)}",
            "PostgreSQL (instance + catalog) + Redis CPU-s per hour (cores)": f"{s * runs * run['services_cpu_run']:,.0f} "
                                                         f"({s * runs * run['services_cpu_run'] / 3600:.1f})",
            "raw JSONL per day, GB": f"{s * shard['raw_bytes_hour'] * 24 / 1e9:,.0f}",
            "lake data files per day, GB": f"{s * 24 * (first['stored_bytes'] + (runs - 1) * extra) / shard['k'] / 1e9:,.0f}",
            "catalog transactions per s": f"{s * runs * run['commits'] / 3600:,.1f}",
            "lake snapshots per day": f"{s * runs * 24 * run['snapshots']:,.0f}",
            "data files per day": f"{s * runs * 24 * run['data_files']:,.0f}",
            "catalog DB growth per day, GB": f"{s * runs * 24 * run.get('catalog_bytes', nan) / 1e9:,.2f}",
            "Dagster events per hour": f"{s * runs * run['events_run']:,.0f}"})
    return rows


def projection(shard: dict) -> tuple[str, str]:
    """The projection table and the arithmetic behind it."""
    if "again" not in shard:
        return "(no 1-worker distributed home measured: no projection)", ""
    first, again, k = shard["first"], shard["again"], shard["k"]
    fixed, fixed_again = (max(r["celery_overhead_run"] or 0.0, 0.0) for r in (first, again))
    rows = [row for n in PROJECTED for row in _cadence_rows(shard, n)]
    arithmetic = "\n".join([
        f"- S shards = ceil(GPUs / {SHARD:,}); each shard-hour is its own detect run (hour x shard partitions, issue 21 item 3: "
        "not built, so this is on paper). Per shard, every figure is the 4,096-GPU hour's (1 worker, median of the repeats) "
        f"/ {k:g}, i.e. linear in GPUs, except where it is per run (below).",
        f"- hourly: CPU-s per hour = S x {first['cpu_shard']:.1f} (the first run: ingest, baselines, checks; the tree's CPU) "
        f"(low); high adds S x {fixed:.1f}, the per-run cost of the steps on Celery (the first distributed run's CPU minus the "
        "embedded lake run's on the same hour), which a run of a quarter of the GPUs still pays whole.",
        f"- live: CPU-s per hour = S x (60 x {again['cpu_shard']:.1f} + {first['ingest_cpu_shard']:.1f}): 60 runs like the second "
        "run (nothing new to ingest; baselines and checks over the whole hour: a minute-55 tick, a little more than a live "
        f"run's incremental baselines) plus the hour's ingest once (the first run's ingest steps); high adds S x 60 x {fixed_again:.1f}, "
        "the second runs' Celery cost measured the same way.",
        "- cores = CPU-s per hour / 3,600, rounded up, at 100% use: a worker runs one step at a time on about a core. PostgreSQL "
        "and Redis are beside it: their CPU per run as measured (per run, not per GPU) x S x runs per hour.",
        f"- lake data files: {first['stored_bytes'] / k / 1e6:,.0f} MB per shard-hour (the first run's Parquet); each further run "
        f"rewrites {(again['stored_bytes'] - first['stored_bytes']) / k / 1e6:,.1f} MB per shard that stays until the daily "
        "maintenance merges files and expires snapshots (not run here: per-day figures are before it).",
        f"- catalog, per run (taken equal for a shard's run: the same steps commit to the same tables whatever the GPUs): first run "
        f"{first['commits']:,.0f} PostgreSQL transactions (reads too), {first['snapshots']:.0f} snapshots, {first['data_files']:.0f} "
        f"data files, {first['catalog_bytes'] / 1e6:.1f} MB of catalog database (DuckLake inlines small inserts there); "
        f"second run {again['commits']:,.0f}, {again['snapshots']:.0f}, {again['data_files']:.0f}, "
        f"{again['catalog_bytes'] / 1e6:.1f} MB; Dagster events {first['events_run']:.0f} per run.",
    ])
    return _md(rows), arithmetic
def _figure(value) -> str:
    return "-" if value is None else f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"


def report(data: dict) -> str:
    homes, gpus = data["homes"], data["gpus"]
    raw = data["raw"]
    dist = [h for h in homes if h["kind"] == "distributed"]
    emb = [h for h in homes if h["kind"] in ("file", "lake")]
    shard = per_shard(data)
    table, arithmetic = projection(shard)
    shard_rows = [{"figure": name, **{run: _figure(shard[run].get(name)) for run in RUNS if run in shard}}
                  for name in (shard["first"] if "first" in shard else {})]
    return "\n\n".join([
        f"# {data['scenario']}: {gpus:,} GPUs, hour {data['hour']} ({data['started']} - {data.get('finished', '?')}; "
        f"load average {data['load_start'][0]:.2f} at the start, {(data.get('load_end') or [float('nan')])[0]:.2f} at the end)",
        f"Raw zone: {raw['raw_files']:,} files, {raw['raw_bytes'] / 1e9:.2f} GB "
        + ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in raw["raw_bytes_by_source"].items())
        + (f"; simulated in {raw['simulate_wall_s']:.0f} s wall, {raw['simulate_cpu_s']:.0f} CPU-s" if "simulate_wall_s" in raw else ""),
        "## Distributed stack: 1 and 2 Celery workers\n\n" + _md(_run_rows(dist)),
        "Ratio 2 workers / 1 worker (side by side):\n\n" + _md(_ratios(dist, "w1", "w2", "2w/1w")),
        "## Embedded, in-process executor: the DuckDB file and the DuckLake\n\n" + _md(_run_rows(emb)),
        "Ratio lake / file (side by side):\n\n" + _md(_ratios(emb, "file", "lake", "lake/file")),
        "## CPU by step group (steps one at a time: sampled every 0.1 s)\n\n" + _md(_groups(homes, gpus)),
        f"## Per shard (1,024 GPUs; 1-worker distributed homes, medians): raw JSONL {shard['raw_bytes_hour'] / 1e6:,.0f} MB an hour"
        "\n\n`_shard`: per 1,024 GPUs (the hour's figure / GPUs x 1,024); `_run`: per detect run, whatever its GPUs.\n\n"
        + _md(shard_rows),
        "## Projection, on paper\n\n" + table + "\n\n" + arithmetic,
    ])
