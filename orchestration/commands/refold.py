"""`goodput refold`: fold every finding into incidents again from scratch (the full refold).

The `incidents` asset folds only the (signal, entity) groups whose findings or resolution changed
since its last fold (assets/incidents_incremental.py). This command forgets that state and runs the
`fold_incidents` job on the home's Dagster instance, so every group is folded again: after a change
of the fold's code or settings (which also refolds by itself), or to check the incremental fold
(`--check`: compare what is stored with a full fold, write nothing).
"""

from __future__ import annotations

from orchestration.commands.common import QUIET, CliError, use_home


def add_parser(sub) -> None:
    p = sub.add_parser("refold", help="fold every finding into incidents again (full refold)")
    p.add_argument("--home")
    p.add_argument("--check", action="store_true", help="compare the stored incidents with a full fold; write nothing")
    p.set_defaults(func=cmd_refold)


def cmd_refold(args) -> int:
    import dagster as dg

    home = use_home(args.home)   # before the code location loads: its partitions start from GOODPUT_HOME
    from assets import incident_fold as full
    from assets.incidents_incremental import clear_state
    from orchestration.config.home import warehouse_path
    from orchestration.definitions import build_definitions
    from orchestration.storage import sql
    from orchestration.storage.warehouse import warehouse_for

    warehouse = warehouse_for(home)
    if not warehouse_path(home).exists():
        raise CliError(f"no warehouse at {warehouse_path(home)}: nothing to fold yet")
    if args.check:
        with warehouse.connect(read_only=True, wait_seconds=30) as con:
            folded, transitions = full.fold(sql.frame(con, "incidents/findings"), sql.frame(con, "incidents/evaluations"),
                                            versions=sql.frame(con, "incidents/serving_versions"),
                                            clearings=sql.frame(con, "incidents/clearings"))
            stored = con.execute("SELECT incident_id, status, tier, last_seen, correlation_id FROM incidents").df()
        fresh = folded[["incident_id", "status", "tier", "last_seen", "correlation_id"]]
        same = (stored.sort_values("incident_id").astype(str).reset_index(drop=True)
                .equals(fresh.sort_values("incident_id").astype(str).reset_index(drop=True)))
        print(f"{len(stored)} stored incident(s), {len(fresh)} from a full fold: " + ("the same" if same else "DIFFERENT"))
        return 0 if same else 1
    with warehouse.connect() as con:
        clear_state(con)
    result = build_definitions(home).resolve_job_def("fold_incidents").execute_in_process(
        instance=dg.DagsterInstance.get(), run_config=QUIET, raise_on_error=False)
    if not result.success:
        raise CliError("the fold failed: see the run in `goodput ui`")
    print("refolded every finding into incidents")
    return 0
