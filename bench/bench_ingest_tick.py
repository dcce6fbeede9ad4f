"""Ingest cost per tick follows the new data: one hour of a scenario grows minute by minute (as the
replay grows it: each line at its time plus its source's latency), and each tick ingests it.

    python bench/bench_ingest_tick.py [--scenario bench/scenarios/scale_128.yaml] [--out FILE.json]

Per tick, the CPU-seconds of the incremental ingest (assets/ingest_incremental.py: only the bytes
that arrived) of every source; at minutes 5 and 55 also the whole-hour read (the former cost, in a
second warehouse). Target (issue 15): the tick at minute 55 costs <= 1.2x the tick at minute 5.
At the end both warehouses must hold the same rows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    import pandas as pd

    from assets.ingest import SOURCES
    from assets.ingest_incremental import ingest_hour
    from orchestration.evaluation.replay import GrowingRawZone
    from orchestration.partitions import naive_utc
    from orchestration.storage.raw_zone import RawZoneResource
    from orchestration.storage.warehouse import WarehouseResource
    from simulator import load_scenario, simulate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(REPO / "bench" / "scenarios" / "scale_128.yaml"))
    parser.add_argument("--out")
    args = parser.parse_args()
    scenario = load_scenario(Path(args.scenario))
    root = Path(tempfile.mkdtemp(prefix="goodput-bench-ingest-tick-"))
    t0 = time.monotonic()
    simulate(scenario, root / "staging")
    print(f"simulated {scenario.name} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    raw = GrowingRawZone(root / "staging" / "raw", root / "home" / "raw")
    zone = RawZoneResource(root=str(root / "home" / "raw"))
    start = naive_utc(scenario.start)
    end = start + timedelta(hours=1)
    incremental = WarehouseResource(path=str(root / "incremental.duckdb"))
    whole = WarehouseResource(path=str(root / "whole.duckdb"))

    def ingest(warehouse, flag) -> tuple[float, float, int]:
        cpu, wall, read = time.process_time(), time.monotonic(), 0
        with warehouse.connect() as con:
            for source in SOURCES:
                read += ingest_hour(con, source, zone.files(source.folder, start), start, end, flag).get("bytes_read", 0)
        return time.process_time() - cpu, time.monotonic() - wall, read

    rows = []
    for minute in range(1, 62):
        lines = raw.advance(scenario.start + timedelta(minutes=minute))
        cpu, wall, read = ingest(incremental, True)
        row = {"minute": minute, "lines_appended": lines, "incremental_cpu_s": round(cpu, 3), "incremental_wall_s": round(wall, 3),
               "incremental_bytes_read": read}
        if minute in (5, 55):
            cpu, wall, read = ingest(whole, False)
            row.update(whole_hour_cpu_s=round(cpu, 3), whole_hour_wall_s=round(wall, 3), whole_hour_bytes_read=read)
        rows.append(row)
        print(f"  minute {minute}: {lines} lines, {row['incremental_cpu_s']} CPU-s", file=sys.stderr, flush=True)
    ingest(whole, False)
    with incremental.connect(read_only=True) as a, whole.connect(read_only=True) as b:
        for table in ("gpu_samples", "training_steps", "quarantine"):
            order = "source, file, line" if table == "quarantine" else "source_file, source_line"
            assert a.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall() == \
                b.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall(), table
    frame = pd.DataFrame(rows)
    at = frame.set_index("minute")
    summary = {
        "scenario": scenario.name,
        "incremental_cpu_s_min5": float(at.loc[5, "incremental_cpu_s"]), "incremental_cpu_s_min55": float(at.loc[55, "incremental_cpu_s"]),
        "whole_hour_cpu_s_min5": float(at.loc[5, "whole_hour_cpu_s"]), "whole_hour_cpu_s_min55": float(at.loc[55, "whole_hour_cpu_s"]),
        "incremental_cpu_s_all_ticks": round(float(frame["incremental_cpu_s"].sum()), 2),
        "load_average": os.getloadavg(),
    }
    # a single tick is noisy on a shared machine: also the mean of minutes 3-7 and 53-57
    summary["incremental_mean_min3_7"] = round(float(frame[frame["minute"].between(3, 7)]["incremental_cpu_s"].mean()), 3)
    summary["incremental_mean_min53_57"] = round(float(frame[frame["minute"].between(53, 57)]["incremental_cpu_s"].mean()), 3)
    summary["incremental_ratio_55_over_5"] = round(summary["incremental_mean_min53_57"] / summary["incremental_mean_min3_7"], 2)
    summary["whole_hour_ratio_55_over_5"] = round(summary["whole_hour_cpu_s_min55"] / summary["whole_hour_cpu_s_min5"], 2)
    print(f"# Ingest per tick, {scenario.name}\n")
    print(pd.DataFrame([summary]).T.to_markdown(headers=["", "value"]))
    if args.out:
        Path(args.out).write_text(json.dumps({**summary, "ticks": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
