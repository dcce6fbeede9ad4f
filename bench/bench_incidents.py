"""Incidents benchmark (issue 17 items 2 and 10): pages per injected event, and the share of
entity-hours the checks could judge.

    python bench/bench_incidents.py [--scenario FILE ...] [--home ROOT] [--reuse | --resume] [--out FILE.json]

Every detection scenario by default: simulator/scenarios/faults.yaml and every
bench/scenarios/detection_*.yaml (found when the bench starts, so a scenario added later is in).
Each is simulated into a fresh home `ROOT/<scenario>` (or, with `--reuse`, read as already processed
by this code; `--resume` processes only those not yet finished) and every hour is processed through
the real Definitions (`orchestration.commands.common.run_pipeline`, as `goodput demo`). Per scenario, and over
all of them, it reports:

- pages per injected event: for each fault whose incidents (the shared scorer's match) reach the
  paging sink (the default routes' `pagerduty`: SEV1 at opening or by escalation), the distinct
  PagerDuty dedup keys triggered whose notification holds one of them (orchestration/alerting/
  grouping.py), mean over those faults (target 1.0), and the same with grouping off
  (`group_by: incident`, one page per incident: the behaviour before);
- judged: from table `judgements`, the share of (signal, entity, hour) evaluations that judged the
  entity, the share of entity-hours some signal judged, the share of entity-minutes some signal
  judged, the share of (signal, entity) minutes judged, the not-judged reasons by signal, and the
  entity-hours no signal judged with their reasons.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from orchestration.alerting.config import DEFAULT_CONFIG, Grouping, load_config  # noqa: E402
from orchestration.alerting.grouping import notifications  # noqa: E402
from orchestration.evaluation.scoring import load_truth, match  # noqa: E402

PAGER = "pagerduty"


def _cpu() -> float:
    """CPU seconds of this process and its finished children (a run's subprocesses, if any)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def default_scenarios() -> list[Path]:
    """faults.yaml and every bench/scenarios/detection_*.yaml present now."""
    return [REPO / "simulator" / "scenarios" / "faults.yaml", *sorted((REPO / "bench" / "scenarios").glob("detection_*.yaml"))]


def process(scenario_path: Path, home: Path) -> dict:
    from orchestration.commands.common import run_pipeline, use_home
    from simulator import load_scenario, simulate

    scenario = load_scenario(scenario_path)
    home.mkdir(parents=True, exist_ok=True)
    use_home(str(home))
    simulate(scenario, home)
    run_pipeline(home, scenario.start, scenario.end, progress=lambda _m: None, alerts=False)
    return {"hours": (scenario.end - scenario.start).total_seconds() / 3600}


def pages_per_event(transitions: pd.DataFrame, truth: pd.DataFrame, grouping: Grouping, causes: list[dict] = ()) -> dict:
    """Per paged fault, the pages raised for it: distinct pager dedup keys whose FIRST notification
    holds one of its incidents (a later update under a key already paged raises no page). A fault
    whose incidents reach the pager only as updates of another event's page is `merged` (no page of
    its own: under-paging), reported beside the mean (target 1.0)."""
    from orchestration.sensors.alerts import alert_records

    config = load_config(DEFAULT_CONFIG)
    alerts = [a for a in alert_records(transitions) if PAGER in config.route(a)]
    notes, _held = notifications(alerts, grouping, float("inf"))
    first_of, any_of = {}, {}
    for n in (n for n in notes if n["transition"] != "resolved"):
        ids = {m["incident_id"] for m in n.get("group_members") or []} or {n["incident_id"]}
        first_of.setdefault(n["incident_id"], ids)
        any_of.setdefault(n["incident_id"], set()).update(ids)
    opened = transitions[transitions["transition"] == "opened"].drop_duplicates("incident_id")
    matched = match(truth, opened)
    per_fault, unpaged = [], []
    tiers = dict(zip(opened["incident_id"], opened["tier"]))
    for fault in matched.itertuples():
        mine = set(fault.incident_ids)
        raised = {key for key, ids in first_of.items() if ids & mine}
        reached = {key for key, ids in any_of.items() if ids & mine}
        if reached:
            per_fault.append({"type": fault.type, "entity": fault.entity, "onset": str(fault.onset), "pages": len(raised),
                              "merged_into_another_page": not raised})
        elif mine:   # detected, but no incident of it reached the pager (its tier is not paged)
            unpaged.append({"type": fault.type, "entity": fault.entity, "onset": str(fault.onset),
                            "tiers": "/".join(sorted({tiers.get(i, "?") for i in mine}))})
    frame = pd.DataFrame(per_fault, columns=["type", "entity", "onset", "pages", "merged_into_another_page"])
    # a fault the truth says another caused (`caused_by`: a rank dropout from an XID 79) is that
    # fault's event: their one page is right, so it is not counted as merged
    caused = {(c["type"], c["entity"]) for c in causes}
    frame["merged_into_another_page"] &= ~pd.Series([(t, e) in caused for t, e in zip(frame["type"], frame["entity"])],
                                                    index=frame.index, dtype=bool)
    own = frame[frame["pages"] > 0]   # the events that raised a page: pages per event among them
    return {"paged_faults": len(frame), "pages": len(first_of),
            "pages_per_event": round(float(own["pages"].mean()), 3) if not own.empty else None,
            "max_pages_one_event": int(frame["pages"].max()) if not frame.empty else None,
            "faults_without_own_page": int(frame["merged_into_another_page"].sum()), "by_fault": frame,
            "detected_not_paged": pd.DataFrame(unpaged, columns=["type", "entity", "onset", "tiers"])}


def judged_share(con) -> dict:
    j = con.execute("SELECT * FROM judgements").df()
    if j.empty:
        return {"evaluations": 0}
    hours = j.groupby(["partition_start", "entity_type", "entity_id"])["judged"].any()
    minutes = j.groupby(["partition_start", "entity_type", "entity_id"])[["minutes", "judged_minutes"]].max()
    reasons = (j[~j["judged"]].groupby(["signal", "reason"]).size().rename("entity_hours")
               .reset_index().sort_values("entity_hours", ascending=False))
    return {
        "evaluations": len(j),
        "evaluations_judged_share": round(float(j["judged"].mean()), 4),
        "entity_hours": len(hours),
        "entity_hours_judged_share": round(float(hours.mean()), 4),
        "entity_hours_judged_by_none": int((~hours).sum()),
        "entity_minutes_judged_share": round(float(minutes["judged_minutes"].sum() / max(minutes["minutes"].sum(), 1)), 4),
        "signal_entity_minutes_judged_share": round(float(j["judged_minutes"].sum() / max(j["minutes"].sum(), 1)), 4),
        "by_entity_type": {t: round(float(v), 4) for t, v in hours.groupby(level="entity_type").mean().items()},
        "reasons": reasons,
        "unjudged": unjudged_hours(j, hours),
    }


def unjudged_hours(j: pd.DataFrame, hours: pd.Series) -> pd.DataFrame:
    """The entity-hours no signal judged, by entity type, with the reasons the signals gave."""
    none = hours[~hours].reset_index()[["partition_start", "entity_type", "entity_id"]]
    if none.empty:
        return pd.DataFrame(columns=["entity_type", "entity_hours", "entities", "reasons"])
    why = j.merge(none, on=["partition_start", "entity_type", "entity_id"])
    rows = []
    for kind, mine in why.groupby("entity_type"):
        reasons = mine.groupby("reason").size().sort_values(ascending=False)
        rows.append({"entity_type": kind, "entity_hours": int(none["entity_type"].eq(kind).sum()),
                     "entities": int(mine["entity_id"].nunique()),
                     "reasons": "; ".join(f"{r} ({n} signal-hours)" for r, n in reasons.head(4).items())})
    return pd.DataFrame(rows)


def one(scenario: Path, home: Path, reuse: bool) -> dict:
    """Process one scenario into `home` (unless reused) and measure pages per event and judged share."""
    from orchestration.config.home import warehouse_path
    from orchestration.storage import sql
    from orchestration.storage.warehouse import WarehouseResource

    wall, cpu = time.monotonic(), _cpu()
    done = home / ".bench_incidents_processed"
    if not reuse:
        done.unlink(missing_ok=True)
        process(scenario, home)
        done.write_text(scenario.name + "\n")
    processed = {"wall_s": round(time.monotonic() - wall), "cpu_s": round(_cpu() - cpu), "reused": reuse}
    truth = load_truth(home / "ground_truth.jsonl")
    with WarehouseResource(path=str(warehouse_path(home))).connect(read_only=True, wait_seconds=30) as con:
        transitions = sql.frame(con, "alerts/transitions")
        judged = judged_share(con)
    causes = [json.loads(line) for line in (home / "ground_truth.jsonl").read_text().splitlines() if "caused_by" in line]
    return {"scenario": scenario.stem, "file": str(scenario.relative_to(REPO)) if scenario.is_relative_to(REPO) else str(scenario),
            "faults": len(truth), "processed": processed, "judged": judged,
            "grouped": pages_per_event(transitions, truth, Grouping(), causes),
            "single": pages_per_event(transitions, truth, Grouping(group_by="incident"), causes)}


def _per_event(frames: list[pd.DataFrame]) -> tuple[float | None, int | None]:
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["pages"])
    own = frame[frame["pages"] > 0]
    return (round(float(own["pages"].mean()), 3) if not own.empty else None,
            int(frame["pages"].max()) if not frame.empty else None)


def summary(results: list[dict]) -> pd.DataFrame:
    rows = []
    for r in results:
        g, s, j = r["grouped"], r["single"], r["judged"]
        rows.append({"scenario": r["scenario"], "faults": r["faults"], "paged faults": g["paged_faults"], "pages": g["pages"],
                     "pages per event": g["pages_per_event"], "max one event": g["max_pages_one_event"],
                     "only inside another's page": g["faults_without_own_page"],
                     "pages per event, one per incident": s["pages_per_event"],
                     "entity-hours": j.get("entity_hours", 0), "judged share": j.get("entity_hours_judged_share"),
                     "judged by none": j.get("entity_hours_judged_by_none"),
                     "entity-minutes judged": j.get("entity_minutes_judged_share"),
                     "evaluations judged": j.get("evaluations_judged_share"),
                     "processed wall s": r["processed"]["wall_s"], "processed CPU s": r["processed"]["cpu_s"]})
    grouped, top = _per_event([r["grouped"]["by_fault"] for r in results])
    single, _ = _per_event([r["single"]["by_fault"] for r in results])
    hours = sum(r["judged"].get("entity_hours", 0) for r in results)
    judged = sum(r["judged"].get("entity_hours", 0) - r["judged"].get("entity_hours_judged_by_none", 0) for r in results)
    rows.append({"scenario": "**all**", "faults": sum(r["faults"] for r in results),
                 "paged faults": sum(r["grouped"]["paged_faults"] for r in results),
                 "pages": sum(r["grouped"]["pages"] for r in results), "pages per event": grouped, "max one event": top,
                 "only inside another's page": sum(r["grouped"]["faults_without_own_page"] for r in results),
                 "pages per event, one per incident": single, "entity-hours": hours,
                 "judged share": round(judged / hours, 4) if hours else None, "judged by none": hours - judged,
                 "processed wall s": sum(r["processed"]["wall_s"] for r in results),
                 "processed CPU s": sum(r["processed"]["cpu_s"] for r in results)})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", help="scenario file(s) (default: faults.yaml and every "
                        "bench/scenarios/detection_*.yaml)")
    parser.add_argument("--home", default="/tmp/goodput-bench-incidents", help="root folder: one home per scenario under it")
    parser.add_argument("--reuse", action="store_true", help="read the homes as processed; do not simulate or process")
    parser.add_argument("--resume", action="store_true", help="process only the scenarios whose home has not finished")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    scenarios = [Path(p).resolve() for p in args.scenario] if args.scenario else default_scenarios()
    root = Path(args.home)
    results = []
    for scenario in scenarios:
        home = root / scenario.stem
        reuse = args.reuse or (args.resume and (home / ".bench_incidents_processed").exists())
        print(f"{scenario.stem}: {'reusing' if reuse else 'processing'} {home}", file=sys.stderr, flush=True)
        results.append(one(scenario, home, reuse))
        print(f"{scenario.stem}: {results[-1]['processed']}", file=sys.stderr, flush=True)   # kept if a later one is stopped
    print("machine: " + ", ".join(f"{k} {v}" for k, v in {"cores": os.cpu_count(), "load average":
                                                            " ".join(f"{x:.2f}" for x in os.getloadavg())}.items()))
    print("\n## Pages per injected event and judged share, per scenario\n")
    print(summary(results).to_markdown(index=False))
    for r in results:
        g, s, j = r["grouped"], r["single"], r["judged"]
        print(f"\n### {r['scenario']} ({r['file']})\n")
        both = g["by_fault"].merge(s["by_fault"].drop(columns=["merged_into_another_page"]),
                                   on=["type", "entity", "onset"], suffixes=("_grouped", "_per_incident"))
        print(both.to_markdown(index=False) if not both.empty else "no fault reached the pager")
        if not g["detected_not_paged"].empty:
            print("\ndetected, not paged (their incidents' tiers are not routed to the pager):\n")
            print(g["detected_not_paged"].to_markdown(index=False))
        print(f"\njudged: {json.dumps({k: v for k, v in j.items() if k not in ('reasons', 'unjudged')})}")
        if "reasons" in j and not j["reasons"].empty:
            print("\nnot judged (signal, entity-hours):\n")
            print(j["reasons"].to_markdown(index=False))
        if "unjudged" in j and not j["unjudged"].empty:
            print("\nentity-hours no signal judged:\n")
            print(j["unjudged"].to_markdown(index=False))
    if args.out:
        Path(args.out).write_text(json.dumps({
            "summary": json.loads(summary(results).to_json(orient="records")),
            "scenarios": [{"scenario": r["scenario"], "file": r["file"], "processed": r["processed"],
                           "pages_grouped": {k: v for k, v in r["grouped"].items() if k not in ("by_fault", "detected_not_paged")},
                           "pages_per_incident": {k: v for k, v in r["single"].items() if k not in ("by_fault", "detected_not_paged")},
                           "by_fault": json.loads(r["grouped"]["by_fault"].to_json(orient="records")),
                           "judged": {k: v for k, v in r["judged"].items() if k not in ("reasons", "unjudged")},
                           "not_judged": json.loads(r["judged"]["reasons"].to_json(orient="records")) if "reasons" in r["judged"] else [],
                           "judged_by_none": json.loads(r["judged"]["unjudged"].to_json(orient="records"))
                           if "unjudged" in r["judged"] else []} for r in results]}, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
