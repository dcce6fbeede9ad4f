"""Dagster asset checks, one per registered signal, built from the registry.

Each check evaluates its signal on one hourly partition: it runs the signal's SQL to get the time
series, the detector to get findings, replaces the partition's findings and evaluation mark in
DuckDB, and reports pass/fail with the evidence as metadata. A step stores all its signals in one
transaction (one commit, not one per signal: ~1 CPU-s of a small hour's 3.5).

The checks on one asset run as one step (a `multi_asset_check`, one warehouse connection): each
signal is still its own check with its own evaluation in the UI, but a detect run has 7 check steps,
not 39, and a step's fixed cost (events, a DuckDB open) was most of a quiet hour's run.

With shards configured (orchestration/shards.py) a step of hour x shard partitions judges its signals on
its shard's GPUs only and replaces only their rows (`shard`: sql/shards/frame.sql, store_findings.sql);
checks/sharded.py lays the steps out.
"""

import json
import warnings
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd

import checks.signals  # noqa: F401  (registers the signals)
from checks import episodes, judgement, judgement_absent, windowed
from checks.frames import stack
from checks.registry import LINEAGE_COLUMNS, REGISTRY, Signal
from checks.toolkit import figure
from orchestration.board_links import report_link
from orchestration.board_resource import BoardResource
from orchestration.config.thresholds import ThresholdsResource
from orchestration.partitions import hourly, naive_utc
from orchestration.shards import Shard, shard_of_run
from orchestration.storage import sql
from orchestration.storage.raw_zone import is_live_run
from orchestration.storage.warehouse import POOL, WarehouseLocked, WarehouseResource, transaction
from orchestration.storage.warehouse_retry import is_conflict

# Partitioned asset checks are "preview" in Dagster 1.13; they are what hourly checks need.
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

SEVERITY = {"SEV1": dg.AssetCheckSeverity.ERROR, "SEV2": dg.AssetCheckSeverity.WARN, "SEV3": dg.AssetCheckSeverity.WARN}
MAX_LISTED = 20


@dataclass
class Evaluation:
    """One signal judged on one partition: its series `frame`, `findings`, `judged` (which entities it could
    judge, and why not the others), and `rows`, what sql/detect/store_findings.sql writes for it (by view)."""
    frame: pd.DataFrame
    findings: pd.DataFrame
    judged: pd.DataFrame
    rows: dict[str, pd.DataFrame]

    @property
    def since(self) -> datetime | None:
        """Where a live window began (None: the whole hour was judged)."""
        windows = self.rows["new_windows"]
        if windows.empty or windows["evaluated_from"].iloc[0] == windows["partition_start"].iloc[0]:
            return None
        return pd.Timestamp(windows["evaluated_from"].iloc[0]).to_pydatetime()

    @property
    def entities(self) -> int:
        """How many entities the evaluation saw (its mark's count)."""
        return int(self.rows["new_evaluations"]["entities"].iloc[0])


def evaluate_judged(
    con: duckdb.DuckDBPyConnection, signal: Signal, start: datetime, end: datetime, thresholds: dict | None = None,
    frames: dict | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Run `signal` over [start, end) and store its findings and judgements; returns (series frame,
    findings, judgements). `frames`: the step's reads so far (`shared_read`)."""
    evaluation = judge_signal(con, signal, start, end, thresholds, frames)
    store(con, start, [evaluation])
    return evaluation.frame, evaluation.findings, evaluation.judged


def store(con: duckdb.DuckDBPyConnection, start: datetime, evaluations: list[Evaluation], shard: Shard | None = None) -> None:
    """Replace the partition's findings, clearings, evaluation marks and judgements of every signal in
    `evaluations` in one transaction: a check step's signals land together (one commit, not one each).
    A `shard`'s step replaces its GPUs' rows and its own marks only (the hour's marks are their sum, written
    once after every shard: sql/shards/sum_evaluations.sql)."""
    if not evaluations:
        return
    rows = {name: stack([e.rows[name] for e in evaluations], list(evaluations[0].rows[name].columns))
            for name in evaluations[0].rows}
    with transaction(con, **rows):
        if shard is None:
            sql.run(con, "detect/store_findings", {"start": naive_utc(start)})
        else:
            sql.run(con, "shards/store_findings", {"start": naive_utc(start), "shard_name": shard.name, **shard.params()})
        sql.run(con, "detect/insert_rows")


def judge_signal(
    con: duckdb.DuckDBPyConnection, signal: Signal, start: datetime, end: datetime, thresholds: dict | None = None,
    frames: dict | None = None, shard: Shard | None = None, live: bool = False,
) -> Evaluation:
    """Run `signal` over [start, end): its findings, clearings, evaluation mark and judgements, not yet stored.
    With `shard` (a `host_local` GPU signal), over that shard's GPUs only. `live` (a live run's tick): a
    `live_window` signal is judged from the first minute whose inputs changed, joined to the stored results
    (checks/windowed.py)."""
    start, end = naive_utc(start), naive_utc(end)
    thresholds = dict(signal.thresholds) if thresholds is None else thresholds
    version = windowed.version(signal, thresholds) if signal.live_window and shard is None else None
    state = shared_read(con, "detect/check_windows", {"start": start}, frames) if version else None
    since = windowed.since(state, signal.name, version, start) if version and live else None
    old = windowed.stored(con, signal.name, start) if since else None
    begin = since or start
    frame = shared_read(con, signal.query, {"start": begin, "end": end, **signal.query_params, **thresholds}, frames,
                        shard)
    # episodes still open when the window begins go on by the fault's own evidence (checks/episodes.py);
    # every signal's are read once per step
    carried = shared_read(con, "detect/open_episodes", {"hour": start, "start": begin, "grace_minutes": episodes.GRACE_MINUTES},
                          frames)
    carried = carried[carried["signal"] == signal.name].drop(columns="signal").reset_index(drop=True)
    if since:   # a window's: one per entity (checks/windowed.py)
        carried = windowed.carried(carried, frame)
    carried = carried.drop(columns="own")
    if shard is not None:   # another shard's GPUs are that shard's to carry on or clear
        carried = carried[owned_gpus(shard, carried["entity_id"])].reset_index(drop=True)
    ids = episodes.entity_ids(frame, signal.entity, signal.entity_column)
    findings = signal.detector(episodes.with_open_episodes(frame, ids, carried), thresholds)
    findings = episodes.carried_onsets(findings, carried)
    if signal.entity == "rank":
        findings = with_run_gpus(findings, frame, ids)
    findings = findings.assign(**{c: None for c in LINEAGE_COLUMNS if c not in findings.columns})
    if signal.entity == "gpu" and not findings.empty:
        findings = findings.assign(run_id=[r if isinstance(r, str) and r else allocated_run(con, e, o)
                                           for r, e, o in zip(findings["run_id"], findings["entity_id"], findings["onset"])])
    stored = findings.assign(
        signal=signal.name,
        entity_type=signal.entity,
        partition_start=start,
        evidence=findings["evidence"].map(lambda e: json.dumps(e, sort_keys=True, default=str)),
    )
    if since:   # the window's findings joined to the stored ones: the episodes clearings end
        stored = windowed.findings(old["findings"], stored, since)
    cleared = episodes.clearings(frame, ids, stored, carried, signal.clearing, signal.name, signal.entity, start,
                                 clear_minutes=thresholds.get("clear_minutes", 0.0))
    cleared = cleared.assign(evidence=cleared["evidence"].map(lambda e: json.dumps(e, sort_keys=True, default=str)))
    evaluated = sorted({str(i) for i in ids.dropna().unique()})
    flagged = sorted({str(i) for i in findings["entity_id"].dropna()}) if not findings.empty else []
    marks = pd.DataFrame({
        "signal": [signal.name],
        "partition_start": [start],
        "evaluated_until": [frame["tick"].max() if "tick" in frame.columns and not frame.empty else pd.NaT],
        "entities": [len(evaluated)],
        "flagged": [len(flagged)],
        "entity_ids": [evaluated],
        "flagged_ids": [flagged],
    })
    # which entities the signal could judge, and why not the others (checks/judgement.py); a window counts
    # only the ticks after the stored results' last
    if since and not frame.empty:
        counted = frame["tick"] > windowed.until(state, signal.name)
        judged = judgement.judge(frame[counted], signal.name, signal.entity, signal.entity_column, thresholds, ids[counted])
    else:
        judged = judgement.judge(frame, signal.name, signal.entity, signal.entity_column, thresholds, ids)
    if signal.entity == "gpu":   # GPUs expected this hour without a sample in it (checks/judgement_absent.py)
        absent = shared_read(con, "detect/absent_gpus", {"start": begin, "end": end}, frames)
        if shard is not None:
            absent = absent[owned_gpus(shard, absent["gpu"])].reset_index(drop=True)
        judged = judgement_absent.with_absent_gpus(judged, absent, "gpu")
    judged = judged.assign(signal=signal.name, partition_start=start)[list(judgement.JUDGEMENT_COLUMNS)]
    if since:   # the window joined to the stored results
        cleared = windowed.clearings(old["clearings"], cleared, since)
        judged = windowed.judgements(old["judgements"], judged)
        marks = windowed.mark(old["evaluations"], marks, stored)
        findings = stored.assign(evidence=stored["evidence"].map(json.loads))
    windows = pd.DataFrame({"signal": [signal.name], "partition_start": [start], "evaluated_until": marks["evaluated_until"],
                            "read_dirty_from": [windowed.dirty_from(state, signal.name)], "version": [version],
                            "evaluated_from": [begin]}).iloc[: 1 if version else 0]
    return Evaluation(frame, findings, judged, {"new_findings": stored, "new_evaluations": marks, "new_clearings": cleared,
                                                "new_judgements": judged, "new_windows": windows})


def shared_read(con: duckdb.DuckDBPyConnection, query: str, params: dict, frames: dict | None,
                shard: Shard | None = None) -> pd.DataFrame:
    """`sql/<query>.sql`'s frame, read once per check step for every signal that binds it to the same values
    (`frames`, the step's reads so far; None reads it anyway): every signal's open episodes once, the hour's
    absent GPUs once for the GPU signals, the six checkpoint-audit signals one series frame, XID fatal and
    non-fatal another, the training-loss signals one per lookback they share. The checks do not write what
    they read, so a read stays valid for the step; each signal gets its own copy. With `shard`: its hosts'
    rows only."""
    values = sql.bound(query, params)
    key = (query, repr(values))   # `bound` names them in order
    if frames is not None and key in frames:
        return frames[key].copy()
    if shard is None:
        frame = sql.frame(con, query, values)
    else:
        text = sql.sql_text("shards/frame").replace("/*@query*/", sql.fragment(query))
        frame = sql.execute_text(con, text, {**values, **shard.params()}).df()
    if frames is None:
        return frame
    frames[key] = frame
    return frame.copy()


def owned_gpus(shard: Shard, gpus: pd.Series) -> pd.Series:
    """Which GPUs ("host:index") belong to `shard` (orchestration/shards.py, the `shard_of` macro's rule), as a mask."""
    return gpus.astype(str).map(lambda gpu: shard.owns_host(gpu.rpartition(":")[0])).astype(bool)


def evaluate(
    con: duckdb.DuckDBPyConnection, signal: Signal, start: datetime, end: datetime, thresholds: dict | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`evaluate_judged` without the judgements: (series frame, findings)."""
    frame, findings, _ = evaluate_judged(con, signal, start, end, thresholds)
    return frame, findings


def with_run_gpus(findings: pd.DataFrame, frame: pd.DataFrame, ids: pd.Series) -> pd.DataFrame:
    """Rank findings with `run_gpus` in their evidence: the ranks (GPUs) of their run in the frame.
    A rank's fault stalls its synchronous peers, so the incident's cost counts them all."""
    if findings.empty or "run_id" not in frame.columns:
        return findings
    run_gpus = ids.groupby(frame["run_id"]).nunique()
    return findings.assign(evidence=[{**e, "run_gpus": int(run_gpus[r])} if r in run_gpus.index else e
                                     for e, r in zip(findings["evidence"], findings["run_id"])])


ALLOCATION_MINUTES = 30   # a GPU still counts as its run's this long after the run's last record on it


def allocated_run(con: duckdb.DuckDBPyConnection, gpu: str, at) -> str | None:
    """The run `gpu` ("host:index") was allocated to at `at`, for a GPU finding that names none."""
    host, _, index = str(gpu).rpartition(":")
    if not host or not index.isdigit() or pd.isna(at):
        return None
    row = sql.run(con, "incidents/gpu_allocation", {"host": host, "gpu": int(index), "at": pd.Timestamp(at),
                                                    "within_minutes": ALLOCATION_MINUTES}).fetchone()
    return row[0] if row else None


def check_result(signal: Signal, frame: pd.DataFrame, findings: pd.DataFrame, thresholds: dict,
                 home: Path | None = None, board_url: str | None = None,
                 judged: pd.DataFrame | None = None, asset: str | None = None,
                 entities: int | None = None, since: datetime | None = None) -> dg.AssetCheckResult:
    """Pass/fail with the evidence: value, baseline, threshold, window, offending entities, and the
    report a finding's evidence names (`report_path`, relative to GOODPUT_HOME `home`) as a link:
    to the incident board that serves it (`board_url`), else to the file. `entities`: how many the
    evaluation counted (else counted here); `since`: where a live window began (checks/windowed.py)."""
    metadata: dict = {
        "signal": signal.name,
        "tier": signal.tier,
        "owner": signal.owner,
        "entities_evaluated": int(episodes.entity_ids(frame, signal.entity, signal.entity_column).nunique())
        if entities is None else entities,
        "window": dg.MetadataValue.text(_window(frame) + (f" (a live window from {since:%H:%M}, joined to the hour's stored "
                                                          "results)" if since else "")),
        "thresholds": dg.MetadataValue.json(thresholds),
    }
    if judged is None:   # the evaluation's own judgements, else judged here
        judged = judgement.judge(frame, signal.name, signal.entity, signal.entity_column, thresholds)
    missing = judged[~judged["judged"].astype(bool)]
    metadata["entities_judged"] = int(judged["judged"].sum())
    metadata["entities_not_judged"] = len(missing)
    if not missing.empty:
        metadata["not_judged"] = dg.MetadataValue.md(_not_judged_table(missing.head(MAX_LISTED)))
    if not findings.empty:
        shown = findings.head(MAX_LISTED)
        metadata["offending"] = dg.MetadataValue.md(_table(shown))
        worst = signal.worst(findings)   # the highest value of a signal flagged above, the lowest of one flagged below
        metadata["value"] = float(worst["value"])
        metadata["threshold"] = float(worst["threshold"])
        if worst["baseline"] is not None and not pd.isna(worst["baseline"]):
            metadata["baseline"] = float(worst["baseline"])
        metadata["evidence"] = dg.MetadataValue.json(worst["evidence"])
        report = worst["evidence"].get("report_path") if isinstance(worst["evidence"], dict) else None
        if report and board_url:
            metadata["report"] = dg.MetadataValue.url(report_link(board_url, report))
            metadata["report_link"] = dg.MetadataValue.md(f"[open the report]({report_link(board_url, report)})")
        elif report:
            path = (Path(home) / report).resolve() if home is not None else Path(report)
            metadata["report"] = dg.MetadataValue.path(str(path))
            metadata["report_link"] = dg.MetadataValue.md(f"[open the report]({path.as_uri() if path.is_absolute() else report})")
    return dg.AssetCheckResult(
        asset_key=dg.AssetKey(asset or signal.asset),
        check_name=signal.name,
        passed=findings.empty,
        severity=SEVERITY[signal.tier],
        metadata=metadata,
        description=(
            f"{signal.title}: {findings['entity_id'].nunique()} {signal.entity}(s) flagged"
            if not findings.empty else f"{signal.title}: nothing flagged"
        ) + f" ({judgement.summary(judged, signal.entity)})",
    )


def _window(frame: pd.DataFrame) -> str:
    """The ticks the check judged: the frame's rows inside the partition (`in_window`), not its lookback."""
    judged = frame[frame["in_window"].fillna(False).astype(bool)] if "in_window" in frame.columns else frame
    return f"{judged['tick'].min()} .. {judged['tick'].max()}" if "tick" in judged.columns and not judged.empty else "no data"


def _not_judged_table(missing: pd.DataFrame) -> str:
    lines = ["| entity | minutes present | why not judged |", "|---|---|---|"]
    lines += [f"| {r.entity_id} | {r.minutes} | {r.reason} |" for r in missing.itertuples()]
    return "\n".join(lines)


def _table(findings: pd.DataFrame) -> str:
    lines = ["| entity | onset | detected | last seen | value | threshold | GPUs |", "|---|---|---|---|---|---|---|"]
    for row in findings.itertuples():
        lines.append(
            f"| {row.entity_id} | {row.onset} | {row.detected_at} | {row.last_seen} | {figure(row.value)} | "
            f"{figure(row.threshold)} | {', '.join(row.gpus if row.gpus is not None else [])} |"
        )
    return "\n".join(lines)


def build_checks(signals: list[Signal], name: str, partitions_def: dg.PartitionsDefinition = hourly,
                 asset: str | None = None, shards: tuple[Shard, ...] = ()) -> dg.AssetChecksDefinition:
    """One step evaluating `signals` (each its own check) on one connection, in registry order. A
    signal whose evaluation raises does not stop the others: its error fails the step after them.
    `asset`: the asset the checks are on, when not each signal's own; `shards`: the configured shards,
    for a step partitioned by hour x shard (orchestration/shards.py)."""
    specs = [dg.AssetCheckSpec(
        signal.name,
        asset=asset or signal.asset,
        description=f"[{signal.tier}, owner: {signal.owner}] {signal.description}",
        additional_deps=list(signal.inputs),
        partitions_def=partitions_def,
        blocking=False,
        metadata={"family": signal.family, "entity": signal.entity, "tier": signal.tier, "owner": signal.owner},
    ) for signal in signals]

    @dg.multi_asset_check(specs=specs, name=name, can_subset=True, pool=POOL)
    def _checks(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource, thresholds: ThresholdsResource,
        board: BoardResource,
    ):
        window = context.partition_time_window
        shard = shard_of_run(context, shards)
        selected = {key.name for key in context.selected_asset_check_keys}
        home = Path(warehouse.path).resolve().parent
        errors = []
        live = is_live_run(context.run.tags)   # the raw-zone sensor's tick: windowed signals judge a window
        frames: dict = {}   # what the step's signals read alike, read once (shared_read)
        done: list[tuple[Signal, dict, Evaluation]] = []
        with warehouse.connect() as con:
            for signal in (s for s in signals if s.name in selected):
                try:
                    chosen = thresholds.for_signal(signal.name, signal.thresholds, CATALOGUE)  # checked once per version
                    done.append((signal, chosen, judge_signal(con, signal, window.start, window.end, chosen, frames, shard, live)))
                except WarehouseLocked:
                    raise
                except Exception as error:   # the other signals still run; the step fails after them
                    if is_conflict(error):   # a lake commit conflict (rolled back whole): connect() retries the step
                        raise
                    context.log.error(f"{signal.name}: {type(error).__name__}: {error}")
                    errors.append((signal.name, error))
            # the signals read none of what they store: the step stores them together, then reports each
            store(con, window.start, [evaluation for _, _, evaluation in done], shard)
        for signal, chosen, e in done:
            yield check_result(signal, e.frame, e.findings, chosen, home=home, board_url=board.base(), judged=e.judged,
                               asset=asset, entities=e.entities, since=e.since)
        if errors:
            names = ", ".join(n for n, _ in errors)
            raise RuntimeError(f"{len(errors)} check(s) could not be evaluated: {names}") from errors[0][1]

    return _checks


def build_check(signal: Signal) -> dg.AssetChecksDefinition:
    """One signal's check alone (tests and tools that run a chosen few)."""
    return build_checks([signal], signal.name)


def signals_by_step() -> dict[str, list[Signal]]:
    """The detect job's check steps: per asset, its signals in registry order (one step each)."""
    by_asset: dict[str, list[Signal]] = defaultdict(list)
    for signal in REGISTRY:
        by_asset[signal.asset].append(signal)
    return dict(by_asset)


def _grouped() -> list[dg.AssetChecksDefinition]:
    return [build_checks(group, f"{asset}_checks") for asset, group in signals_by_step().items()]


CATALOGUE = {s.name: s.thresholds for s in REGISTRY}   # what thresholds.yaml may name
signal_checks = _grouped()
