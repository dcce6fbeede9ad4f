"""Detection benchmark: Goodput's signals against generic threshold alerts on the same data.

    python bench/bench_detection.py [--quick] [--scenario FILE ...] [--out FILE.json] [--keep DIR [--reuse]]

For each scenario: simulate it into a fresh home, process every hour through the real Definitions
exactly as `goodput demo` does (`orchestration.commands.common.run_pipeline`: the `detect` job per hour, then
`fold_incidents` and the alert sensor), read the incidents, evaluate the baseline rules
(bench/baseline.py, sql/bench/) on the same warehouse, and score both with the shared scorer
(`orchestration.evaluation.scoring.score`). Prints, across all scenarios, one side-by-side markdown table per
fault type (recall, precision, detection delay p50/p95 for each, and Goodput's open share: the
share of each fault's span during which an incident that caught it was open, mean / min over the
type's faults, target 1.0) and the false alarms per 1,000 GPU-hours of healthy time (GPU-hours
outside every injected fault's span and entity). `bench/scenarios/detection_long.yaml` holds each
SEV1/SEV2 fault 3x its signals' longest lookback, where the open share shows whether an incident
stayed open for the whole fault.

Delay is data time: the incident's `opened` (when its evidence crossed the threshold, or when a
baseline rule's `for:` duration elapsed) minus the fault's onset. Under the every-minute schedule a user
sees it up to a minute later, plus the tick's own run time (reported alongside; bench/bench_replay.py
measures the delay under the real schedule).

`--quick` runs one tiny scenario (seconds, for CI); the default runs `bench/scenarios/detection_*.yaml`
and `simulator/scenarios/faults.yaml`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.baseline import BASELINE, DASHBOARD_UTIL, evaluate  # noqa: E402
from orchestration.evaluation.scoring import EXPECTED_QUIET, load_truth, match, score  # noqa: E402

QUICK = [REPO / "bench" / "scenarios" / "quick.yaml"]
FULL = [REPO / "simulator" / "scenarios" / "faults.yaml", *sorted((REPO / "bench" / "scenarios").glob("detection_*.yaml"))]
# Each scenario's times are shifted by this much times its index before the tables pool them, so
# that the one shared scorer never matches an incident of one scenario to a fault of another.
SHIFT = pd.Timedelta(days=1000)


def _quiet(_line: str) -> None:
    pass


def run_scenario(path: Path, home: Path, reuse: bool = False) -> dict:
    """Simulate, process through the Definitions, and return truth, both incident sets and timings.
    With `reuse`, a home that `--keep` left processed is scored again as it is (timings 0)."""
    from orchestration.commands.common import run_pipeline, use_home
    from orchestration.config.home import warehouse_path
    from orchestration.evaluation.scoring import opened_incidents
    from orchestration.storage.warehouse import WarehouseResource
    from simulator import load_scenario, simulate

    scenario = load_scenario(path)
    home.mkdir(parents=True, exist_ok=True)
    use_home(str(home))
    t0 = time.monotonic()
    again = reuse and warehouse_path(home).exists()
    if not again:
        simulate(scenario, home)
    t1 = time.monotonic()
    partitions = 0 if again else run_pipeline(home, scenario.start, scenario.end, progress=_quiet)["partitions"]
    t2 = time.monotonic()
    incidents, counts = opened_incidents(home)
    with WarehouseResource(path=str(warehouse_path(home))).connect(read_only=True, wait_seconds=30) as con:
        t3 = time.monotonic()
        alerts = evaluate(con)
        t4 = time.monotonic()
    baseline = alerts[alerts["signal"].isin({r.name for r in BASELINE})].reset_index(drop=True)
    dashboard = alerts[alerts["signal"].isin({r.name for r in DASHBOARD_UTIL})].reset_index(drop=True)
    truth = load_truth(home / "ground_truth.jsonl")
    hours = (scenario.end - scenario.start).total_seconds() / 3600
    gpus = scenario.cluster.hosts * scenario.cluster.gpus_per_host
    return {
        "name": scenario.name, "path": str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path),
        "scenario": scenario, "truth": truth, "goodput": incidents, "baseline": baseline, "dashboard": dashboard,
        "rows": counts,
        "gpus": gpus, "hours": hours, "gpu_hours": gpus * hours,
        "healthy_gpu_hours": healthy_gpu_hours(scenario, truth),
        "simulate_s": t1 - t0, "pipeline_s": t2 - t1, "partitions": partitions, "baseline_s": t4 - t3,
    }


def healthy_gpu_hours(scenario, truth: pd.DataFrame) -> float:
    """GPU-hours of the scenario outside every fault: a fault takes its span times its GPUs (one for
    a rank or GPU fault, all the run's hosts' GPUs for a run fault). Overlaps are subtracted once per
    GPU and minute."""
    per_host = scenario.cluster.gpus_per_host
    start = pd.Timestamp(scenario.start).tz_convert("UTC").tz_localize(None)
    minutes = int((scenario.end - scenario.start).total_seconds() // 60)
    faulty: set[tuple[str, int]] = set()
    for fault in truth.itertuples():
        kind, _, name = fault.entity.partition(":")
        if kind == "gpu":
            gpus = [name]
        elif kind == "host":   # a host-wide fault (network, telemetry, clock): every GPU of the host
            gpus = [f"{name}:{g}" for g in range(per_host)]
        elif kind == "rank":
            run_id, _, rank = name.rpartition("/rank-")
            host, gpu = scenario.run(run_id).gpus[int(rank)]
            gpus = [f"node-{host}:{gpu}"]
        elif kind in ("run", "checkpoint"):   # a checkpoint fault: the run's GPUs (name: <run>/step-NNNNNN)
            gpus = [f"node-{h}:{g}" for h in scenario.run(name.split("/")[0]).hosts for g in range(per_host)]
        else:   # an endpoint: its faults are in serving, not in GPU-hours
            gpus = []
        first = max(0, int((fault.onset - start).total_seconds() // 60))
        last = min(minutes, int(-(-(fault.end - start).total_seconds() // 60)))
        faulty.update((g, m) for g in gpus for m in range(first, last))
    total = scenario.cluster.hosts * per_host * minutes
    return (total - len(faulty)) / 60


def pooled(results: list[dict], key: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Truth and incidents of every scenario in one frame each, shifted apart in time."""
    truths, incidents = [], []
    for i, r in enumerate(results):
        t = r["truth"].copy()
        t[["onset", "end"]] = t[["onset", "end"]] + i * SHIFT
        inc = r[key].copy()
        if not inc.empty:
            for col in ("onset", "opened", "last_seen", "resolved"):
                if col in inc.columns:
                    inc[col] = pd.to_datetime(inc[col]) + i * SHIFT
            inc["incident_id"] = r["name"] + "/" + inc["incident_id"].astype(str)
        truths.append(t)
        incidents.append(inc)
    kept = [t for t in truths if not t.empty]
    truth = pd.concat(kept, ignore_index=True) if kept else truths[0]
    frames = [f for f in incidents if not f.empty]
    return truth, (pd.concat(frames, ignore_index=True) if frames else results[0][key].iloc[0:0])


def false_alarms(truth: pd.DataFrame, incidents: pd.DataFrame, registry=None) -> int:
    """Incidents that match no injected fault (each counted once, whatever its fault types)."""
    if incidents.empty:
        return 0
    matched = match(truth, incidents, registry=registry) if registry is not None else match(truth, incidents)
    true_ids = set().union(*matched["incident_ids"]) if not matched.empty else set()
    return int((~incidents["incident_id"].isin(true_ids)).sum())


def _mins(seconds: float) -> str:
    return "-" if seconds != seconds else f"{seconds / 60:.1f}"


def _ratio(value: float) -> str:
    return "-" if value != value else f"{value:.2f}"


def _quiet_outcome(row) -> str:
    """An expected-quiet fault type's outcome: quiet, or how many incidents it caused (false alarms)."""
    n = int(row["false_alarms"])
    return "quiet" if n == 0 else f"{n} false alarm{'s' if n > 1 else ''}"


def detection_table(results: list[dict]) -> tuple[str, pd.DataFrame]:
    truth, goodput = pooled(results, "goodput")
    _, baseline = pooled(results, "baseline")
    ours = score(truth, goodput).set_index("fault_type")
    theirs = score(truth, baseline, registry=BASELINE).set_index("fault_type")
    types = sorted(set(truth["type"]) | set(ours.index) | set(theirs.index))
    rows = []
    for t in types:
        o = ours.loc[t] if t in ours.index else None
        b = theirs.loc[t] if t in theirs.index else None
        injected = int((truth["type"] == t).sum())
        rules = ", ".join(r.name.removeprefix("baseline_") for r in BASELINE.for_fault(t)) or "(no rule)"
        if t in EXPECTED_QUIET:   # nothing to detect: its false alarms are the incidents it caused
            rules = "(expected quiet)"
        rows.append({
            "fault type": t, "injected": injected,
            "Goodput recall": (_quiet_outcome(o) if t in EXPECTED_QUIET else _ratio(o["recall"])) if o is not None else "-",
            "Goodput precision": _ratio(o["precision"]) if o is not None else "-",
            "Goodput delay p50 (min)": _mins(o["delay_median_s"]) if o is not None else "-",
            "Goodput delay p95 (min)": _mins(o["delay_p95_s"]) if o is not None else "-",
            "Goodput open share (mean / min)": (f"{_ratio(o['coverage_mean'])} / {_ratio(o['coverage_min'])}"
                                                if o is not None and injected else "-"),
            "baseline rules": rules,
            "baseline recall": ((_quiet_outcome(b) if t in EXPECTED_QUIET else _ratio(b["recall"])) if b is not None
                                else ("0.00" if injected and t not in EXPECTED_QUIET else "-")),
            "baseline precision": _ratio(b["precision"]) if b is not None else "-",
            "baseline delay p50 (min)": _mins(b["delay_median_s"]) if b is not None else "-",
            "baseline delay p95 (min)": _mins(b["delay_p95_s"]) if b is not None else "-",
        })
    table = pd.DataFrame(rows)
    return table.to_markdown(index=False, disable_numparse=True), table


def false_alarm_table(results: list[dict]) -> str:
    rows = []
    totals = {"healthy": 0.0, "g": 0, "b": 0, "d": 0}

    def per_k(n: int, h: float) -> str:
        return f"{1000 * n / h:.1f}" if h else "-"

    for r in results:
        g = false_alarms(r["truth"], r["goodput"])
        b = false_alarms(r["truth"], r["baseline"], BASELINE)
        d = false_alarms(r["truth"], r["dashboard"], DASHBOARD_UTIL)
        h = r["healthy_gpu_hours"]
        totals["healthy"] += h
        totals["g"] += g
        totals["b"] += b
        totals["d"] += d
        rows.append({"scenario": r["name"], "GPUs": r["gpus"], "hours": r["hours"], "healthy GPU-h": f"{h:.1f}",
                     "Goodput false alarms": g, "Goodput per 1,000 GPU-h": per_k(g, h),
                     "baseline false alarms": b, "baseline per 1,000 GPU-h": per_k(b, h),
                     "dashboard util<10% (any GPU) false alarms": d, "dashboard per 1,000 GPU-h": per_k(d, h)})
    h = totals["healthy"]
    rows.append({"scenario": "**all**", "GPUs": "", "hours": "", "healthy GPU-h": f"{h:.1f}",
                 "Goodput false alarms": totals["g"], "Goodput per 1,000 GPU-h": per_k(totals["g"], h),
                 "baseline false alarms": totals["b"], "baseline per 1,000 GPU-h": per_k(totals["b"], h),
                 "dashboard util<10% (any GPU) false alarms": totals["d"], "dashboard per 1,000 GPU-h": per_k(totals["d"], h)})
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def rule_table(results: list[dict]) -> str:
    """Per baseline rule: how often it fired and how often that was a false alarm."""
    rows = []
    for key, registry in (("baseline", BASELINE), ("dashboard", DASHBOARD_UTIL)):
        truth, alerts = pooled(results, key)
        matched = match(truth, alerts, registry=registry) if not alerts.empty else None
        true_ids = set().union(*matched["incident_ids"]) if matched is not None and not matched.empty else set()
        for rule in registry:
            mine = alerts[alerts["signal"] == rule.name] if not alerts.empty else alerts
            rows.append({"rule": rule.name, "condition": rule.condition,
                         "credited for": ", ".join(rule.fault_types) or "-",
                         "alerts": len(mine), "false alarms": int((~mine["incident_id"].isin(true_ids)).sum())})
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def hang_table(results: list[dict]) -> str:
    """Each injected hang: which of Goodput's signals and which baseline rules caught it, and when."""
    rows = []
    for r in results:
        ours = match(r["truth"], r["goodput"]).set_index(["type", "entity", "onset"])
        theirs = match(r["truth"], r["baseline"], registry=BASELINE).set_index(["type", "entity", "onset"])
        for fault in r["truth"][r["truth"]["type"] == "hang"].itertuples():
            key = (fault.type, fault.entity, fault.onset)
            o, b = ours.loc[key], theirs.loc[key]
            by = r["baseline"].set_index("incident_id").loc[b["incident_ids"], "signal"] if b["detected"] else []
            rows.append({"scenario": r["name"], "run": fault.entity, "onset": f"{fault.onset:%H:%M}",
                         "length (min)": round((fault.end - fault.onset).total_seconds() / 60),
                         "Goodput delay (min)": _mins(o["delay_s"]),
                         "baseline delay (min)": _mins(b["delay_s"]),
                         "baseline rules that fired": ", ".join(sorted(set(by))) or "none"})
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True) if rows else "(no hangs injected)"


def report(results: list[dict], started: float) -> tuple[str, dict]:
    table, frame = detection_table(results)
    timing = pd.DataFrame([{
        "scenario": r["name"], "file": r["path"], "GPUs": r["gpus"], "hours": r["hours"],
        "faults (truth lines)": len(r["truth"]), "step records": r["rows"].get("training_steps"),
        "GPU samples": r["rows"].get("gpu_samples"), "simulate s": round(r["simulate_s"], 1),
        "pipeline s": round(r["pipeline_s"], 1), "s per hourly tick": round(r["pipeline_s"] / max(1, r["partitions"]), 1),
        "baseline rules s": round(r["baseline_s"], 2)} for r in results]).to_markdown(index=False, disable_numparse=True)
    per_tick = sum(r["pipeline_s"] for r in results) / max(1, sum(r["partitions"] for r in results))
    lines = [
        f"# Detection benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, {time.monotonic() - started:.0f} s in all)",
        "", "## Scenarios", "", timing,
        "", "## Per fault type: Goodput vs generic threshold rules (all scenarios pooled; delays in data time)", "", table,
        "", "## Hangs: busy but not progressing", "", hang_table(results),
        "", "## False alarms on healthy time", "", false_alarm_table(results),
        "", "## Baseline rules", "", rule_table(results),
        "", f"Under the real schedule (`detect` every minute on the current hour) a user sees an incident "
        f"at most 1 min + one tick's run time (here ~{per_tick:.0f} s per hourly partition) after the data time above.",
    ]
    data = {"table": frame.to_dict(orient="records"), "seconds_per_tick": per_tick,
            "scenarios": [{k: v for k, v in r.items() if k not in ("scenario", "truth", "goodput", "baseline", "dashboard")}
                          for r in results]}
    return "\n".join(lines), data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one tiny scenario (seconds): what CI runs")
    parser.add_argument("--scenario", action="append", help="scenario file(s) instead of the default set")
    parser.add_argument("--out", help="also write the numbers as JSON here")
    parser.add_argument("--keep", help="put the homes under this folder (default: a temporary one, removed)")
    parser.add_argument("--reuse", action="store_true", help="with --keep: score homes already processed there again")
    args = parser.parse_args(argv)
    paths = [Path(p).resolve() for p in args.scenario] if args.scenario else (QUICK if args.quick else FULL)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="goodput-bench-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        results = []
        for path in paths:
            print(f"... {path.name}", file=sys.stderr, flush=True)
            results.append(run_scenario(path, root / path.stem, reuse=args.reuse and bool(args.keep)))
        text, data = report(results, started)
    print(text)
    if args.out:
        Path(args.out).write_text(json.dumps(data, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
