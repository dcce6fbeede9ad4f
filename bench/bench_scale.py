"""Scale benchmark: one tick's time and peak memory for clusters of 128 to 2,048 GPUs, and how it grows.

    python bench/bench_scale.py [--quick] [--sizes 128,512,1024,2048] [--out FILE.json] [--keep DIR]

For each size N it uses `bench/scenarios/scale_<N>.yaml` (one hour, N ranks of one run on N/8 hosts
stepping every ~2 s, GPU samples every 10 s, one subtle straggler; written by `--write-scenarios`
from the same template as `scale_1024.yaml`), simulates it in one subprocess (`goodput simulate`),
then runs `bench/bench_tick.py --home` on it in a fresh subprocess, so that the peak memory (max
RSS, DuckDB's native memory included) is the tick's alone. Prints a markdown table with the growth
ratio of time and memory from one size to the next against the growth of the data.

`--quick` runs two tiny sizes (8 and 16 GPUs, 10 minutes) in seconds, for CI.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = REPO / "bench" / "scenarios"
SIZES = (128, 512, 1024, 2048)

TEMPLATE = """\
# Scale benchmark (written by `python bench/bench_scale.py --write-scenarios`): {duration} of a
# {n:,}-rank run on {hosts} hosts x 8 H100s, steps every ~2 s and GPU samples every 10 s. Healthy,
# with ordinary noise, an evaluation pause and checkpoints, plus one subtle straggler.
name: scale_{n}
seed: {n}
start: "2026-11-30T00:00:00Z"
duration: {duration}
cluster:
  hosts: {hosts}
  gpus_per_host: 8
  gpu: {{name: "NVIDIA H100 80GB HBM3", memory_total_bytes: 85899345920, power_limit_watts: 700}}
  sample_interval: 10s
runs:
  - id: llm-pretrain-{n}
    job: llm-pretrain
    start: 0s
    duration: {duration}
    hosts: [{host_list}]
    step_time: 2.0s
    precision: bf16
    tokens_per_step: 16384
    loss: {{initial: 9.0, floor: 2.1, decay: 0.35, noise: 0.02}}
    learning_rate: {{peak: 3.0e-4, warmup_steps: 300, min_ratio: 0.1}}
    checkpoint_interval_steps: 500
    checkpoint_bytes: {checkpoint_bytes}
    eval_interval_steps: 1000
    ordinary_noise: true
faults:
  - {{type: straggler, target: rank:llm-pretrain-{n}/rank-{rank}, onset: {onset}, duration: {fault}, magnitude: 0.3}}
"""


def scenario_text(n: int, quick: bool = False) -> str:
    hosts = n // 8
    host_list = ", ".join(str(h) for h in range(hosts))
    return TEMPLATE.format(n=n, hosts=hosts, host_list=host_list, duration="10m" if quick else "1h",
                           checkpoint_bytes=957 * 10**6 * n, rank=(n // 2 + 5) % n, onset="4m" if quick else "35m",
                           fault="5m" if quick else "20m")


def write_scenarios(sizes=SIZES) -> list[Path]:
    """Write scale_<N>.yaml for each size (1,024 stays the hand-written one if present)."""
    paths = []
    for n in sizes:
        path = SCENARIOS / f"scale_{n}.yaml"
        if not path.exists():
            path.write_text(scenario_text(n))
        paths.append(path)
    return paths


def measure(scenario: Path, home: Path) -> dict:
    """Simulate here, tick in a subprocess of its own (its peak RSS is the tick's alone); the tick's JSON
    (seconds, peak RSS, rows)."""
    from simulator import load_scenario, simulate

    t0 = time.monotonic()
    if not (home / "raw").exists():  # a kept home (--keep) is reused as it is
        simulate(load_scenario(scenario), home)
    simulate_s = time.monotonic() - t0
    for stale in ("bench.duckdb", "bench.duckdb.wal", "reference.duckdb", "reference.duckdb.wal"):
        (home / stale).unlink(missing_ok=True)  # every tick starts from an empty warehouse
    out = home / "tick.json"
    subprocess.run([sys.executable, str(REPO / "bench" / "bench_tick.py"), "--scenario", str(scenario),
                    "--home", str(home), "--out", str(out)], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    result["simulate_s"] = simulate_s
    result["raw_bytes"] = sum(f.stat().st_size for f in (home / "raw").rglob("*.jsonl"))
    return result


def table(results: dict[int, dict]) -> str:
    rows, previous = [], None
    for n, r in sorted(results.items()):
        stages = {s["stage"]: s["seconds"] for s in r["rows"]}
        ingest = sum(v for k, v in stages.items() if k.startswith("ingest"))
        baselines = sum(v for k, v in stages.items() if k.startswith("baseline"))
        checks = sum(v for k, v in stages.items() if k.startswith("check"))
        records = sum(r["counts"].values())
        row = {"GPUs": f"{n:,}", "records": f"{records:,}", "raw MB": f"{r['raw_bytes'] / 1e6:,.0f}",
               "ingest s": f"{ingest:.1f}", "baselines s": f"{baselines:.1f}", "checks s": f"{checks:.1f}",
               "tick s": f"{r['tick_seconds']:.1f}", "peak RSS MiB": f"{r['peak_rss_mib']:,.0f}",
               "x data": "", "x time": "", "x memory": ""}
        if previous is not None:
            pn, pr, precords = previous
            row["x data"] = f"{records / precords:.2f}"
            row["x time"] = f"{r['tick_seconds'] / pr['tick_seconds']:.2f}"
            row["x memory"] = f"{r['peak_rss_mib'] / pr['peak_rss_mib']:.2f}"
        rows.append(row)
        previous = (n, r, records)
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two tiny sizes (8, 16 GPUs, 10 minutes): what CI runs")
    parser.add_argument("--sizes", help="comma-separated GPU counts (multiples of 8); default 128,512,1024,2048")
    parser.add_argument("--write-scenarios", action="store_true", help="write bench/scenarios/scale_<N>.yaml and exit")
    parser.add_argument("--out", help="also write the measurements as JSON here")
    parser.add_argument("--keep", help="keep the simulated homes under this folder")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([8, 16] if args.quick else list(SIZES))
    if args.write_scenarios:
        for path in write_scenarios(sizes):
            print(path)
        return 0
    results = {}
    with tempfile.TemporaryDirectory(prefix="goodput-scale-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        for n in sizes:
            home = root / f"scale_{n}"
            if args.quick:
                scenario = home.parent / f"scale_{n}_quick.yaml"
                scenario.parent.mkdir(parents=True, exist_ok=True)
                scenario.write_text(scenario_text(n, quick=True))
            else:
                scenario = SCENARIOS / f"scale_{n}.yaml"
                if not scenario.exists():
                    write_scenarios([n])
            print(f"... {n} GPUs", file=sys.stderr, flush=True)
            results[n] = measure(scenario, home)
            if not args.keep:
                shutil.rmtree(home / "raw", ignore_errors=True)  # GBs at the large sizes
    print(f"# One tick (one hour's partition) per cluster size ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    print(table(results))
    print("\n`x` columns: growth from the previous size (data = records in the hour).")
    if args.out:
        Path(args.out).write_text(json.dumps({str(n): r for n, r in results.items()}, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
