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


def _md(rows: list[dict]) -> str:
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True) if rows else "(nothing measured)"


def _pct(values: list[float], q: float) -> float:
    return float(pd.Series(values).quantile(q)) if values else float("nan")


def _run_rows(homes: list[dict]) -> list[dict]:
    rows = []
    for h in homes:
        for i, r in enumerate(h["runs"], 1):
            row = {"home": h["label"], "run": "first" if i == 1 else "again", "wall s": f"{r['wall_s']:.1f}",
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
            rows.append({"repeat": repeat, "run": "first" if i == 1 else "again", f"wall {name}": f"{rb['wall_s'] / ra['wall_s']:.2f}",
                         f"CPU {name}": f"{rb['cpu_s'] / ra['cpu_s']:.2f}",
                         f"CPU incl. PostgreSQL + Redis {name}": f"{_with_services(rb) / _with_services(ra):.2f}"})
    return rows


def _groups(homes: list[dict], gpus: int) -> list[dict]:
    rows = []
    for h in homes:
        if not all("cpu_s" in s for r in h["runs"] for s in r["steps"]):
            continue   # two workers: steps overlap, no per-step CPU
        for i, r in enumerate(h["runs"], 1):
            row = {"home": h["label"], "run": "first" if i == 1 else "again"}
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
    """The per-1,024-GPU figures the projection uses (medians over the repeats)."""
    homes, k = data["homes"], data["gpus"] / SHARD
    cpu = lambda r: r["cpu_s"]   # noqa: E731
    out = {"raw_bytes_hour": data["raw"]["raw_bytes"] / k}
    d1 = _median(homes, "distributed", 1, cpu, workers=1)
    lake = _median(homes, "lake", 1, cpu)
    if d1 is not None:
        out["distributed_cpu_hour"] = d1 / k
        out["services_cpu_run"] = _median(homes, "distributed", 1, lambda r: r["services_cpu_s"], workers=1)
        out["events_run"] = _median(homes, "distributed", 1, lambda r: r.get("events", 0), workers=1)
        if lake is not None:
            out["celery_overhead_run"] = d1 - lake
    source = "distributed" if d1 is not None else "lake"
    first = [h for h in homes if h["kind"] == source]
    if first:
        out["lake_bytes_hour"] = statistics.median(h["runs"][0]["stored_bytes"] for h in first) / k
        for name in ("snapshots", "data_files", "delete_files", "rows_inserted", "rows_changed", "commits", "catalog_bytes"):
            out[f"catalog_{name}_run"] = statistics.median(h["runs"][0]["catalog"].get(name, float("nan")) for h in first)
    if lake is not None:
        out["lake_cpu_hour"] = lake / k
    file_ = _median(homes, "file", 1, cpu)
    if file_ is not None:
        out["file_cpu_hour"] = file_ / k
    return out


def projection(shard: dict) -> tuple[str, str]:
    """The projection table and the arithmetic behind each row."""
    c = shard.get("distributed_cpu_hour")
    if c is None:
        return "(no distributed run measured: no projection)", ""
    fixed = max(shard.get("celery_overhead_run") or 0.0, 0.0)
    rows = []
    for n in PROJECTED:
        s = math.ceil(n / SHARD)
        low, high = s * c, s * (c + fixed)
        row = {"GPUs": f"{n:,}", "shards of 1,024 GPUs": str(s),
               "CPU-s per hour of data (low - high)": f"{low:,.0f} - {high:,.0f}",
               "cores (= workers) to keep up, hour by hour": f"{math.ceil(low / 3600)} - {math.ceil(high / 3600)}",
               "raw JSONL per day, GB": f"{s * shard['raw_bytes_hour'] * 24 / 1e9:,.0f}",
               "lake data per day, GB": f"{s * shard.get('lake_bytes_hour', float('nan')) * 24 / 1e9:,.1f}",
               "catalog transactions per hour": f"{s * shard.get('catalog_commits_run', float('nan')):,.0f}",
               "catalog database growth per day, MB": f"{s * shard.get('catalog_catalog_bytes_run', float('nan')) * 24 / 1e6:,.0f}",
               "catalog snapshots / data files per day": (f"{s * shard.get('catalog_snapshots_run', float('nan')) * 24:,.0f} / "
                                                          f"{s * shard.get('catalog_data_files_run', float('nan')) * 24:,.0f}"),
               "catalog rows inserted per hour": f"{s * shard.get('catalog_rows_inserted_run', float('nan')):,.0f}",
               "PostgreSQL + Redis CPU-s per hour": f"{s * (shard.get('services_cpu_run') or float('nan')):,.0f}",
               "Dagster events per hour": f"{s * (shard.get('events_run') or float('nan')):,.0f}"}
        rows.append(row)
    arithmetic = "\n".join([
        f"- shards S = ceil(GPUs / {SHARD:,}); every shard's hour is one detect run (hour x shard partitions: issue 21 item 3, not built).",
        f"- CPU per shard-hour, low: the 4,096-GPU hour's distributed run (1 worker, run again, tree CPU) / 4 = {c:.1f} CPU-s, "
        f"i.e. linear in GPUs; high: plus the per-run cost of running the steps on Celery, measured as that run's CPU minus the embedded "
        f"lake run's on the same hour ({fixed:.1f} CPU-s), paid again by every shard's run. CPU-s per hour = S x that.",
        "- cores to keep up = CPU-s per hour / 3,600, rounded up: each worker runs one step at a time (--concurrency 1) on about a core, "
        "with no headroom, hour by hour (one detect per shard-hour; the live service's run every minute costs more).",
        f"- raw JSONL: {shard['raw_bytes_hour'] / 1e9:.2f} GB per shard-hour x S x 24; lake: "
        f"{shard.get('lake_bytes_hour', float('nan')) / 1e6:.0f} MB of data files per shard-hour (the first write of the hour) x S x 24, "
        "before the daily maintenance merges files and expires snapshots.",
        f"- catalog, per shard-run, taken equal to the measured whole-hour run's (the same steps commit, each writes the same tables): "
        f"{shard.get('catalog_commits_run', float('nan')):.0f} PostgreSQL transactions (read ones too), "
        f"{shard.get('catalog_catalog_bytes_run', float('nan')) / 1e6:.1f} MB of catalog database (inlined small writes too), "
        f"{shard.get('catalog_snapshots_run', float('nan')):.0f} "
        f"lake snapshots, {shard.get('catalog_data_files_run', float('nan')):.0f} data files, "
        f"{shard.get('catalog_rows_inserted_run', float('nan')):,.0f} catalog rows inserted; PostgreSQL + Redis "
        f"{shard.get('services_cpu_run') or float('nan'):.1f} CPU-s and {shard.get('events_run') or float('nan'):.0f} "
        "Dagster events per run; x S.",
    ])
    return _md(rows), arithmetic


def report(data: dict) -> str:
    homes, gpus = data["homes"], data["gpus"]
    raw = data["raw"]
    dist = [h for h in homes if h["kind"] == "distributed"]
    emb = [h for h in homes if h["kind"] in ("file", "lake")]
    shard = per_shard(data)
    table, arithmetic = projection(shard)
    shard_rows = [{"per 1,024 GPUs, one hour": k, "value": f"{v:,.2f}" if isinstance(v, float) else f"{v:,}"}
                  for k, v in shard.items() if v is not None]
    return "\n\n".join([
        f"# {data['scenario']}: {gpus:,} GPUs, hour {data['hour']} ({data['started']} - {data.get('finished', '?')}; "
        f"load average {data['load_start'][0]:.2f} at the start, {data.get('load_end', [float('nan')])[0]:.2f} at the end)",
        f"Raw zone: {raw['raw_files']:,} files, {raw['raw_bytes'] / 1e9:.2f} GB "
        + ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in raw["raw_bytes_by_source"].items())
        + (f"; simulated in {raw['simulate_wall_s']:.0f} s wall, {raw['simulate_cpu_s']:.0f} CPU-s" if "simulate_wall_s" in raw else ""),
        "## Distributed stack: 1 and 2 Celery workers\n\n" + _md(_run_rows(dist)),
        "Ratio 2 workers / 1 worker (side by side):\n\n" + _md(_ratios(dist, "w1", "w2", "2w/1w")),
        "## Embedded, in-process executor: the DuckDB file and the DuckLake\n\n" + _md(_run_rows(emb)),
        "Ratio lake / file (side by side):\n\n" + _md(_ratios(emb, "file", "lake", "lake/file")),
        "## CPU by step group (steps one at a time: sampled every 0.1 s)\n\n" + _md(_groups(homes, gpus)),
        "## Per shard (1,024 GPUs): medians of the runs again\n\n" + _md(shard_rows),
        "## Projection, on paper\n\n" + table + "\n\n" + arithmetic,
    ])
