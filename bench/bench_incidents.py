"""Incidents benchmark (issue 17 items 2 and 10): pages per injected event, and the share of
entity-hours the checks could judge.

    python bench/bench_incidents.py [--scenario FILE] [--home DIR] [--reuse]

Simulates the scenario into a fresh home (or, with `--reuse`, reads a home already processed by
this code) and processes every hour through the real Definitions (`orchestration.cli.run_pipeline`,
as `goodput demo`), then reports:

- pages per injected event: for each fault whose incidents (the shared scorer's match) reach the
  paging sink (the default routes' `pagerduty`: SEV1 at opening or by escalation), the distinct
  PagerDuty dedup keys triggered whose notification holds one of them (orchestration/alerting/
  grouping.py), mean over those faults (target 1.0), and the same with grouping off
  (`group_by: incident`, one page per incident: the behaviour before);
- judged: from table `judgements`, the share of (signal, entity, hour) evaluations that judged the
  entity, the share of entity-hours some signal judged, the share of entity-minutes some signal
  judged, the share of (signal, entity) minutes judged, and the not-judged reasons by signal.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from orchestration.alerting.config import DEFAULT_CONFIG, Grouping, load_config  # noqa: E402
from orchestration.alerting.grouping import notifications  # noqa: E402
from orchestration.scoring import load_truth, match  # noqa: E402

PAGER = "pagerduty"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process(scenario_path: Path, home: Path) -> dict:
    from orchestration.cli import run_pipeline, use_home
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
    from orchestration.sensors import alert_records

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
    per_fault = []
    for fault in matched.itertuples():
        mine = set(fault.incident_ids)
        raised = {key for key, ids in first_of.items() if ids & mine}
        reached = {key for key, ids in any_of.items() if ids & mine}
        if reached:
            per_fault.append({"type": fault.type, "entity": fault.entity, "pages": len(raised),
                              "merged_into_another_page": not raised})
    frame = pd.DataFrame(per_fault, columns=["type", "entity", "pages", "merged_into_another_page"])
    # a fault the truth says another caused (`caused_by`: a rank dropout from an XID 79) is that
    # fault's event: their one page is right, so it is not counted as merged
    caused = {(c["type"], c["entity"]) for c in causes}
    frame["merged_into_another_page"] &= ~pd.Series([(t, e) in caused for t, e in zip(frame["type"], frame["entity"])],
                                                    index=frame.index, dtype=bool)
    own = frame[frame["pages"] > 0]   # the events that raised a page: pages per event among them
    return {"paged_faults": len(frame), "pages": len(first_of),
            "pages_per_event": round(float(own["pages"].mean()), 3) if not own.empty else None,
            "max_pages_one_event": int(frame["pages"].max()) if not frame.empty else None,
            "faults_without_own_page": int(frame["merged_into_another_page"].sum()), "by_fault": frame}


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
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default=str(REPO / "simulator" / "scenarios" / "faults.yaml"))
    parser.add_argument("--home", default="/tmp/goodput-bench-incidents")
    parser.add_argument("--reuse", action="store_true", help="read --home as processed; do not simulate or process")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    from orchestration.home import warehouse_path
    from orchestration.warehouse import WarehouseResource

    home = Path(args.home)
    wall, cpu = time.monotonic(), _cpu()
    if not args.reuse:
        process(Path(args.scenario), home)
    processed_wall, processed_cpu = time.monotonic() - wall, _cpu() - cpu
    truth = load_truth(home / "ground_truth.jsonl")
    with WarehouseResource(path=str(warehouse_path(home))).connect(read_only=True, wait_seconds=30) as con:
        from orchestration import sql
        transitions = sql.frame(con, "alerts/transitions")
        judged = judged_share(con)
    causes = [json.loads(line) for line in (home / "ground_truth.jsonl").read_text().splitlines() if "caused_by" in line]
    grouped = pages_per_event(transitions, truth, Grouping(), causes)
    single = pages_per_event(transitions, truth, Grouping(group_by="incident"), causes)
    print(f"scenario {args.scenario}: processed in {processed_wall:.0f} s wall, {processed_cpu:.0f} s CPU"
          + (" (reused)" if args.reuse else ""))
    print(f"pages per injected event: {grouped['pages_per_event']} grouped (max {grouped['max_pages_one_event']}, "
          f"{grouped['paged_faults']} paged faults, {grouped['pages']} pages, {grouped['faults_without_own_page']} fault(s) "
          f"only inside another event's page); {single['pages_per_event']} one page per incident "
          f"(max {single['max_pages_one_event']}, {single['pages']} pages)")
    both = grouped["by_fault"].merge(single["by_fault"].drop(columns=["merged_into_another_page"]),
                                     on=["type", "entity"], suffixes=("_grouped", "_per_incident"))
    print(both.to_markdown(index=False))
    print(f"judged: {json.dumps({k: v for k, v in judged.items() if k != 'reasons'})}")
    if "reasons" in judged:
        print(judged["reasons"].to_markdown(index=False))
    if args.out:
        Path(args.out).write_text(json.dumps({
            "scenario": args.scenario, "pages_grouped": {k: v for k, v in grouped.items() if k != "by_fault"},
            "pages_per_incident": {k: v for k, v in single.items() if k != "by_fault"},
            "judged": {k: v for k, v in judged.items() if k != "reasons"}}, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
