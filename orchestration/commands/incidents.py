"""`goodput incidents`: the incidents for people at a terminal (list; `show ID` with playbook and lineage).

Reads the warehouse read-only; while a run holds the write lock it says so in one line and exits 2.
"""

import argparse
import contextlib
import json

from tabulate import tabulate

from orchestration.commands.common import CliError, use_home


@contextlib.contextmanager
def _connect(home):
    import duckdb

    from orchestration.config.home import warehouse_path
    from orchestration.storage.warehouse_open import analyst_for

    with analyst_for(home, wait_seconds=5) as con:   # read-only, and no Dagster loaded (warehouse_open.py)
        try:
            yield con
        except duckdb.CatalogException:
            raise CliError(f"{warehouse_path(home)} predates incident tracking: run `goodput demo` or any Goodput run "
                           "to migrate it") from None


def cmd_list(args) -> int:
    from orchestration.storage import sql

    home = use_home(args.home)
    with _connect(home) as con:
        rows = sql.frame(con, "incidents/list", {"status": args.status, "tier": args.tier, "limit": args.limit})
        unjudged = sql.frame(con, "incidents/not_judged")
    if rows.empty:
        print(f"no {'' if args.status == 'all' else args.status + ' '}incidents in {home}")
        _print_not_judged(unjudged)
        return 0
    listed = [(r.incident_id, r.tier, r.status, f"{r.onset:%Y-%m-%d %H:%M:%S}", f"{r.last_seen:%Y-%m-%d %H:%M:%S}",
               f"{r.gpu_hours_at_risk or 0:.2f}", r.owner, r.title) for r in rows.itertuples()]
    print(tabulate(listed, headers=["incident", "tier", "status", "onset", "last seen", "GPU-h", "owner", "title"],
                   tablefmt="plain", disable_numparse=True, colalign=["left"] * 5 + ["right", "left", "left"]))
    _print_not_judged(unjudged)
    return 0


def _print_not_judged(rows, limit: int = 12) -> None:
    """What the latest hour could not judge: silence about those entities is not health."""
    if rows.empty:
        print("not judged: no check has recorded what it could judge yet (run the detect job)")
        return
    hour = rows["hour"].iloc[0]
    print(f"\njudged in the latest evaluated hour ({hour:%Y-%m-%d %H:%M}):")
    for r in rows[rows["kind"] == 0].itertuples():
        line = f"  {r.entity_type}: {r.seen - r.not_judged} of {r.seen} judged by some signal"
        if r.not_judged:
            line += f"; {r.not_judged} {r.entity_type}(s) not judged by any signal: {r.reason}"
        print(line)
    partial = rows[rows["kind"] == 1]
    for r in partial.head(limit).itertuples():
        print(f"  {r.not_judged} {r.entity_type}(s) not judged by {r.signal}: {r.reason}")
    if len(partial) > limit:
        print(f"  … {len(partial) - limit} more (SELECT * FROM judged_entities)")


def cmd_show(args) -> int:
    from orchestration.alerting.journal import AlertJournal, journal_path

    home = use_home(args.home)
    with _connect(home) as con:
        found = con.execute("SELECT * FROM incidents WHERE incident_id = $id", {"id": args.incident_id}).df()
        if found.empty:
            raise CliError(f"no incident {args.incident_id} in {home}: `goodput incidents` lists them")
        inc = found.iloc[0]
        transitions = con.execute("SELECT * FROM incident_transitions WHERE incident_id = $id ORDER BY seq",
                                  {"id": inc.incident_id}).df()
        related = con.execute("SELECT incident_id, tier, status, title FROM incidents WHERE correlation_id = $c "
                              "AND incident_id <> $id ORDER BY onset", {"c": inc.correlation_id, "id": inc.incident_id}).df()
        started = con.execute("SELECT payload FROM lineage_events WHERE event = 'run_started' AND run_id = $r "
                              "ORDER BY time DESC LIMIT 1", {"r": inc.run_id}).fetchone()
        # each attempt's last record (torn or foreign lines skipped); a grouped one names its lead
        attempts = list({a["attempt_id"]: a for a in AlertJournal(journal_path(home)).attempts()}.values())
        leads = con.execute("SELECT incident_id, tier, title FROM incidents WHERE list_contains($ids, incident_id)",
                            {"ids": sorted({a["lead_incident_id"] for a in attempts if a.get("lead_incident_id")})}).fetchall()
    print(f"{inc.incident_id}  [{inc.tier}] {inc.status}  {inc.title}")
    print(f"  signal {inc.signal} ({inc.family})  owner {inc.owner}  episode {inc.episode}"
          + (f" (reopens {inc.previous_incident_id})" if inc.previous_incident_id else ""))
    print(f"  tier: {inc.tier_reason}")
    print(f"  onset {inc.onset}  opened {inc.opened}  last seen {inc.last_seen}  resolved {_or(inc.resolved, '-')}")
    print(f"  GPU-hours at risk {inc.gpu_hours_at_risk:.2f}  findings {inc.findings}")
    print(f"  resolution: {_or(inc.get('resolution'), 'open: no evidence yet that the fault is over')}")
    print("\nLineage")
    print(f"  {inc.entity_type} {inc.entity_id}" + ("" if inc.entity_type == "run" else f"   run {_or(inc.run_id, '-')}"))
    ranks = list(inc.ranks) if inc.ranks is not None else []
    if ranks:
        print(f"  ranks {', '.join(str(r) for r in ranks)}")
    print(f"  hosts {', '.join(inc.hosts) or '-'}   GPUs {', '.join(inc.gpus) or '-'}")
    print(f"  last checkpoint before onset: {_or(inc.checkpoint, 'none recorded')}")
    if started:
        run = json.loads(started[0])
        print("  run started: " + ", ".join(f"{k} {run[k]}" for k in ("job", "git_sha", "config_hash", "dataset", "world_size")
                                          if run.get(k) is not None))
    if not related.empty:
        print(f"  correlated ({inc.correlation_id}):")
        for r in related.itertuples():
            print(f"    {r.incident_id}  [{r.tier}] {r.status}  {r.title}")
    print("\nEvidence")
    for key, value in sorted(json.loads(inc.evidence or "{}").items()):
        print(f"  {key}: {value}")
    print("\nTransitions")
    leads = {i: f"{i} [{tier}] {title}" for i, tier, title in leads}
    for t in transitions.itertuples():
        print(f"  {t.transition_at}  {t.transition:<9} {t.tier}  {t.reason}")
        for line in delivery_lines(attempts, inc.incident_id, t.transition, t.seq, leads):
            print(f"      {line}")
    print("\nPlaybook")
    for line in inc.playbook.splitlines():
        print(f"  {line}")
    return 0


def delivery_lines(attempts, incident_id: str, transition: str, seq, leads: dict[str, str]) -> list[str]:
    """Where one transition of an incident went: the sinks that have its own alert, and each grouped
    notification that carried it (a member of a correlated event reaches a sink inside the event's
    notification, under the anchor's id): its key, lead incident, and per sink the delivery time."""
    from orchestration.alerting.journal import carried

    seq = None if _or(seq, None) is None else int(seq)
    mine = [a for a in attempts if carried(a, incident_id, transition, seq)]
    delivered = [a for a in mine if a["outcome"] == "delivered"]
    failed = sum(1 for a in mine if a["outcome"] not in ("delivered", "sending"))
    lines = []
    own = sorted({a["sink"] for a in delivered if a.get("carried") is None})
    if own:
        lines.append(f"delivered to {', '.join(own)}")
    by_key: dict[str, list[dict]] = {}
    for a in (a for a in delivered if a.get("carried") is not None):
        by_key.setdefault(a["dedup_key"], []).append(a)
    for key, sent in by_key.items():
        lead = sent[0].get("lead_incident_id")
        who = "this incident" if lead == incident_id else leads.get(lead, lead or "unknown")
        lines.append(f"delivered in the grouped notification {key} (lead {who}; {sent[0].get('group_size') or '?'} members): "
                     + ", ".join(f"{a['sink']} at {a['attempted_at']}" for a in sorted(sent, key=lambda a: a["attempted_at"])))
    if not lines:
        lines.append("delivered to no sink yet")
    if failed:
        lines[-1] += f"; {failed} failed attempt(s)"
    return lines


def _or(value, default):
    try:
        missing = value is None or value != value   # None, NaN, NaT
    except (TypeError, ValueError):
        missing = False
    return default if missing else value


def _lines(path):
    return path.read_text().splitlines() if path.exists() else []


def add_parser(sub) -> None:
    p = sub.add_parser("incidents", help="list incidents, or show one with its playbook and lineage")
    p.add_argument("--home", help="GOODPUT_HOME (default: $GOODPUT_HOME or ./.goodput)")
    p.add_argument("--status", choices=("open", "resolved", "all"), default="all")
    p.add_argument("--tier", choices=("SEV1", "SEV2", "SEV3"))
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(func=cmd_list)
    actions = p.add_subparsers(dest="action")
    show = actions.add_parser("show", help="one incident: tier and why, lineage, evidence, transitions, playbook")
    show.add_argument("incident_id")
    show.add_argument("--home", default=argparse.SUPPRESS, help="GOODPUT_HOME (default: $GOODPUT_HOME or ./.goodput)")
    show.set_defaults(func=cmd_show)
