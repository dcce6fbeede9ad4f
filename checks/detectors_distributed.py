"""Detectors of the distributed-training signals: stragglers, collective regressions, rank
dropouts and gradient skew.

Each takes its signal's per-rank (or per-run) per-minute frame from `sql/detect/<signal>.sql` and
returns findings in `registry.FINDING_COLUMNS`. A rank is compared with the median of its peers
(the run's other ranks that minute, itself left out, so that a two-rank run still has a fair
reference) and with its own history; findings on a rank name its host and GPU and carry what the
GPU layer saw on that GPU at the time (cross-layer evidence).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from checks import episodes
from checks.detectors_gpu import throttle_names
from checks.hysteresis import bridge_dips, persisted
from checks.toolkit import (
    MAD_TO_SIGMA,
    MINUTE,
    active_stretches,
    empty_findings,
    finding,
    findings_frame,
    fixed,
    mark_stretches,
    missing,
    num,
    prepare,
    suspects,
)


def loo_median(values: pd.Series, groups: list[pd.Series]) -> pd.Series:
    """Per row, the median of the other rows of its group (itself left out); NaN values are
    ignored, and a row alone in its group gets NaN. Vectorised: sort once, pick by position."""
    v = values.astype(float).to_numpy()
    valid = ~np.isnan(v)
    out = np.full(len(v), np.nan)
    if not valid.any():
        return pd.Series(out, index=values.index)
    # (a MultiIndex's factorize builds a tuple per row: most of this function's time at minute 55)
    gid = values.groupby([g.to_numpy() for g in groups], sort=False, dropna=False).ngroup().to_numpy()
    idx = np.flatnonzero(valid)
    order = idx[np.lexsort((v[idx], gid[idx]))]
    sv, sg = v[order], gid[order]
    starts = np.flatnonzero(np.r_[True, sg[1:] != sg[:-1]])
    sizes = np.diff(np.r_[starts, len(sg)])
    group_of = np.repeat(np.arange(len(starts)), sizes)
    start, n = starts[group_of], sizes[group_of]
    pos = np.arange(len(sg)) - start           # the row's position within its sorted group
    k = n - 1                                  # how many peers

    def pick(h):                               # the h-th smallest peer: skip the row itself
        h = np.clip(h, 0, None)
        return sv[np.clip(start + h + (h >= pos), 0, len(sv) - 1)]

    odd = pick((k - 1) // 2)
    even = 0.5 * (pick(k // 2 - 1) + pick(k // 2))
    med = np.where(k % 2 == 1, odd, even)
    med = np.where(k == 0, np.nan, med)
    out[order] = med
    return pd.Series(out, index=values.index)


def _rank_finding(stretch: pd.DataFrame, active: pd.DataFrame, value: float, baseline, threshold: float,
                  evidence: dict, onset=None) -> dict:
    """One finding on a rank: named "<run>/rank-<r>", with its host and GPU."""
    first = active.iloc[0]
    host = None if missing(first.get("host")) else str(first["host"])
    gpu = f"{host}:{int(first['gpu_index'])}" if host is not None and not missing(first.get("gpu_index")) else None
    return finding(
        entity_id=f"{first['run_id']}/rank-{int(first['rank'])}",
        onset=onset if onset is not None else stretch["tick"].iloc[0] - MINUTE,
        detected_at=active["tick"].iloc[0], last_seen=active["tick"].iloc[-1],
        run_id=first["run_id"], rank=int(first["rank"]), hosts=[host] if host else [], gpus=[gpu] if gpu else [],
        value=value, baseline=baseline, threshold=threshold,
        evidence={"rank": int(first["rank"]), "host": host, "gpu": gpu, "minutes": int(len(active)), **evidence},
    )


def _ranked(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of the rank frame with its `entity_id` ("<run>/rank-<r>": the SQL's, else episodes.entity_ids'), in
    the frame's order."""
    if "entity_id" in frame.columns:
        return frame.copy()
    return frame.assign(entity_id=episodes.entity_ids(frame, "rank", "entity_id"))


def _suspects(f: pd.DataFrame, entry: pd.Series, **columns: pd.Series) -> pd.DataFrame:
    """The ranks of `f` (`_ranked`, with the detector's per-row columns) a stretch can flag (toolkit.suspects:
    an `entry` row or an episode carried in), prepared per rank and tick; `_entry` and `columns` ride along.
    Peer medians are taken over every rank before: only marking the stretches is left to the suspects."""
    return prepare(suspects(f.assign(**columns), entry, ["entity_id"]), "entity_id")


def gpu_layer(active: pd.DataFrame) -> dict:
    """What the GPU under a rank reported over the flagged minutes (columns `gpu_*` of the frame)."""
    if "gpu_sm_clock_hertz" not in active.columns or active["gpu_sm_clock_hertz"].isna().all():
        return {"gpu_layer": "no GPU samples for this rank's GPU"}
    reasons = int(np.bitwise_or.reduce(active["gpu_throttle_reasons"].fillna(0).astype(np.int64).to_numpy()))
    names = throttle_names(reasons)
    clock = float(active["gpu_sm_clock_hertz"].median())
    usual = float(active["gpu_sm_clock_baseline"].dropna().iloc[0]) if active["gpu_sm_clock_baseline"].notna().any() else float("nan")
    drop = 100 * (1 - clock / usual) if usual == usual and usual > 0 else float("nan")
    temp = active["gpu_temperature_celsius"].max()
    power, limit = active["gpu_power_watts"].median(), active["gpu_power_limit_watts"].max()
    xids = sorted({int(x) for x in active["gpu_last_xid"].dropna()}) if "gpu_last_xid" in active.columns else []
    summary = (f"{fixed(temp)} °C, throttle reasons {'|'.join(names) or 'none'}, SM clock {fixed(clock / 1e6)} MHz "
               f"vs {fixed(usual / 1e6)} MHz usual ({fixed(-drop, '+.1f')}%), {fixed(power)} W of {fixed(limit)} W"
               + (f", XID {', '.join(map(str, xids))}" if xids else ", no XID"))
    return {
        "gpu_layer": summary,
        "gpu_temperature_max_celsius": num(temp, 1),
        "gpu_throttle_reasons": "|".join(names) or "none",
        "gpu_sm_clock_mhz": num(clock / 1e6, 0),
        "gpu_sm_clock_baseline_mhz": num(usual / 1e6, 0),
        "gpu_clock_drop_pct": num(drop, 1),
        "gpu_power_watts": num(power, 0),
        "gpu_power_limit_watts": num(limit, 0),
        "gpu_last_xid": xids[-1] if xids else None,
    }


def straggler_rank(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A rank that computes slower than its peers in the same minutes while they wait for it.

    Judged against its PEERS (the median of the run's other ranks that minute), not its own history:
    an imbalance present from the first minute watched is as costly as one that appeared. A minute
    counts when the rank computes `min_peer_ratio` x its peers' median, the peers wait for it (their
    collective exceeds its own by `min_wait_share` of its extra compute) and it is one of a few such
    ranks (under a third of the run), or it slowed down against its own history (`min_baseline_minutes`
    of it): a job whose ranks split into a fast and a slow group from the start is built that way.
    Severity and duration trade off by the GPU-time the run loses (every rank waits for the slow one:
    extra compute x steps x the run's GPUs): an episode opens after `min_minutes` such minutes, or
    after `min_short_minutes` (never one) of `min_short_steps` steps or more that cost
    `min_lost_gpu_minutes`. Hysteresis: it stays open while the rank stays `exit_peer_ratio` x its peers with them waiting,
    and a dip shorter than `clear_minutes` does not end it (the clearing needs as long in step).
    """
    if frame.empty:
        return empty_findings()
    f = _ranked(frame)
    by_minute = [f["run_id"], f["minute"]]
    # a record without the breakdown (per-worker step times only): its step less its data time is its work
    data = f["data_seconds"].astype(float).fillna(0) if "data_seconds" in f.columns else 0.0
    f["work"] = f["compute_seconds"].astype(float).fillna(f["step_seconds"].astype(float) - data)
    f["peer_compute"] = loo_median(f["work"], by_minute)
    f["peer_collective"] = loo_median(f["collective_seconds"], by_minute)
    f["peer_ratio"] = f["work"] / f["peer_compute"]
    f["run_gpus"] = f["work"].notna().groupby(by_minute).transform("sum")
    extra = f["work"] - f["peer_compute"]
    waited = (f["peer_collective"] - f["collective_seconds"]) >= thresholds["min_wait_share"] * extra
    waiting = waited | f["collective_seconds"].isna() | f["peer_collective"].isna()
    stepping = f["steps_completed"].gt(0)
    slow = f["peer_ratio"].ge(thresholds["min_peer_ratio"]) & stepping
    # a straggler is one rank or a few (under a third: the peers' median stays among the healthy); a
    # larger slow group is a straggler only if it slowed down against its own history (a host that
    # degraded), else that job is built that way (mixed GPU models, uneven pipeline stages)
    slow_ranks = slow.groupby(by_minute).transform("sum")
    few = slow_ranks.le(np.maximum(1, (f["run_gpus"] - 1) // 3))
    changed = (f["work"].ge(thresholds["min_peer_ratio"] * f["compute_seconds_baseline"])
               & f["baseline_minutes"].ge(thresholds["min_baseline_minutes"]))
    entry = slow & waiting & (few | changed)
    sustain = f["peer_ratio"].ge(thresholds["exit_peer_ratio"]) & waiting & stepping
    # GPU-minutes the run loses per minute: each step, every GPU waits `extra` for this rank
    per_minute = np.minimum(f["steps_completed"].fillna(0) * extra.clip(lower=0), 60.0) * f["run_gpus"] / 60.0
    f = _suspects(f, entry, lost_gpu_minutes=per_minute.where(entry, 0.0), _sustain=sustain)
    if f.empty:
        return empty_findings()
    entry, sustain = f["_entry"], f["_sustain"]
    entered = persisted(f, "entity_id", entry, f["lost_gpu_minutes"], thresholds["min_minutes"],
                        thresholds["min_short_minutes"], thresholds["min_lost_gpu_minutes"], thresholds["max_gap_minutes"],
                        support=f["steps_completed"], min_support=thresholds["min_short_steps"])
    f = mark_stretches(f, "entity_id", entered, sustain=sustain, min_minutes=1, max_gap_minutes=thresholds["max_gap_minutes"])
    f = bridge_dips(f, "entity_id", thresholds["clear_minutes"], thresholds["max_gap_minutes"])
    rows = []
    for stretch, active in active_stretches(f):
        ratio = float(active["peer_ratio"].median())
        own = stretch["compute_seconds_baseline"].iloc[0] if "compute_seconds_baseline" in stretch else np.nan
        lost = (np.minimum(active["steps_completed"].fillna(0) * (active["work"] - active["peer_compute"]).clip(lower=0), 60.0)
                * active["run_gpus"] / 60.0).sum()
        rows.append(_rank_finding(
            stretch, active, value=100 * ratio, baseline=100.0, threshold=100 * thresholds["min_peer_ratio"],
            evidence={
                "slowdown_pct": num(100 * (ratio - 1), 1),
                "compute_seconds": num(active["work"].median(), 4),
                "peer_compute_seconds": num(active["peer_compute"].median(), 4),
                "own_baseline_compute_seconds": num(own, 4),
                "own_change_pct": num(100 * (active["work"].median() / own - 1), 1),
                "collective_seconds": num(active["collective_seconds"].median(), 4),
                "peer_collective_seconds": num(active["peer_collective"].median(), 4),
                "run_gpus": int(active["run_gpus"].max()),
                "gpu_minutes_lost": num(lost, 1),
                **gpu_layer(active),
            },
        ))
    return findings_frame(rows)


def collective_regression(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A run whose communication time rises persistently above its trailing baseline: the network or
    the NCCL path degraded, on every host or on one.

    The statistic is the transfer time (`sql/detect/collective_regression.sql`): each rank's collective
    minus its wait for the last rank to arrive, the median per host, the slowest host per run. A
    straggler lengthens its peers' collectives by exactly that wait, so it neither raises the statistic
    nor drags its baseline up, and a network slowdown during a straggler still shows; compute is
    evidence, not a condition (a compute change is its own signal). Opened after `min_minutes` minutes
    at `min_rise` x the baseline and a robust z of `min_z`; it stays open while the transfer time stays
    `min_rise` above the lowest baseline seen in the lookback (the trailing baseline drifts up with the
    fault). Names the slowest host(s) when the others stayed at their baseline, else every host.
    """
    if frame.empty:
        return empty_findings()
    f = prepare(frame, "run_id")
    base = f["transfer_seconds_baseline"]
    spread = np.fmax(MAD_TO_SIGMA * f["transfer_seconds_mad"].fillna(0), thresholds["min_rel_spread"] * base)
    f["rise"] = f["transfer_seconds"] / base
    f["z"] = (f["transfer_seconds"] - base) / spread
    entry = (f["rise"].ge(thresholds["min_rise"]) & f["z"].ge(thresholds["min_z"])
             & f["baseline_minutes"].ge(thresholds["min_baseline_minutes"]))
    # the lowest baseline since the lookback began, or the healthy one a carried episode opened with
    floor = episodes.held_reference(f, f["transfer_baseline_floor"])
    f["reference"] = episodes.held_reference(f, base)
    sustain = f["transfer_seconds"] >= thresholds["min_rise"] * floor
    f = mark_stretches(f, "run_id", entry, sustain=sustain, min_minutes=thresholds["min_minutes"],
                       max_gap_minutes=thresholds["max_gap_minutes"])
    rows = []
    for stretch, active in active_stretches(f):
        entered = active.iloc[0]
        usual = float(entered["reference"])
        value = float(active["transfer_seconds"].median())
        hosts, gpus = _degraded(active, thresholds["min_rise"] * usual)
        rows.append(finding(
            entity_id=entered["run_id"], onset=stretch["tick"].iloc[0] - MINUTE, detected_at=active["tick"].iloc[0],
            last_seen=active["tick"].iloc[-1], run_id=entered["run_id"], hosts=hosts, gpus=gpus,
            value=100 * value / usual, baseline=100.0, threshold=100 * thresholds["min_rise"],
            evidence={
                "transfer_seconds": num(value, 4),
                "transfer_baseline_seconds": num(usual, 4),
                "held_reference": usual,
                "rise_pct": num(100 * (value / usual - 1), 1),
                "z": num(active["z"].median(), 1),
                "collective_seconds": num(active["collective_seconds"].median(), 4),
                "wait_seconds": num(active["wait_seconds"].median(), 4),
                "compute_seconds": num(active["compute_seconds"].median(), 4),
                "compute_baseline_seconds": num(entered["compute_seconds_baseline"], 4),
                "compute_outlier_ratio": num(active["compute_outlier_ratio"].max(), 3),
                "scope": "every host" if hosts == _all(active, "hosts") else f"host {', '.join(hosts)}",
                "ranks_reporting": int(active["ranks_reporting"].max()),
                "minutes": int(len(active)),
            },
        ))
    return findings_frame(rows)


def _all(active: pd.DataFrame, column: str) -> list[str]:
    return sorted(set().union(*[set(v) for v in active[column] if v is not None])) if column in active else []


def _degraded(active: pd.DataFrame, limit: float) -> tuple[list[str], list[str]]:
    """The hosts (and their GPUs of the run) a regression speaks of: every host when even the fastest
    host's transfer time rose past `limit` in most flagged minutes, else the slowest host(s)."""
    hosts, gpus = _all(active, "hosts"), _all(active, "gpus")
    if "fastest_host_transfer_seconds" not in active or active["fastest_host_transfer_seconds"].ge(limit).mean() >= 0.5:
        return hosts, gpus
    share = active["slowest_host"].dropna().astype(str).value_counts(normalize=True)
    slow = sorted(set(share[share >= 0.25].index) & set(hosts))
    return (slow, [g for g in gpus if g.rpartition(":")[0] in slow]) if slow else (hosts, gpus)


def rank_dropout(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A rank that stopped reporting steps while its peers go on, or while the run still holds its
    peers' GPUs but no longer its own (it died: released, or its GPU fell off the bus).

    Silent means no step for `min_silence_seconds` and `silence_factor` x the run's step interval.
    In synchronous training the peers stop too (they block in the next collective), so the dead
    rank is the one whose GPU left the run; checkpoint and evaluation pauses stop every rank but
    keep every GPU, and a finished run releases all GPUs together, so neither qualifies. Flagged
    after `min_minutes`; the onset is the rank's last step.
    """
    if frame.empty:
        return empty_findings()
    f = _ranked(frame)
    limit = np.fmax(thresholds["min_silence_seconds"], thresholds["silence_factor"] * f["step_interval_seconds"].fillna(0))
    silence = (f["tick"] - f["last_step_time"]).dt.total_seconds()
    run_silence = (f["tick"] - f["run_last_step_time"]).dt.total_seconds()
    silent = silence.ge(limit)
    peers_go_on = run_silence.lt(limit)
    gpu_known = f["host"].notna() & f["gpu_index"].notna()
    gpu_gone = gpu_known & ~f["gpu_held"].fillna(False).astype(bool)
    peers_held = (f["gpus_held"].fillna(0) - f["gpu_held"].fillna(False).astype(int)).ge(1)
    f = _suspects(f, silent & (peers_go_on | (gpu_gone & peers_held)), silence_seconds=silence, limit_seconds=limit,
                  _peers_go_on=peers_go_on)
    if f.empty:
        return empty_findings()
    f = mark_stretches(f, "entity_id", f["_entry"], min_minutes=thresholds["min_minutes"])
    rows = []
    for stretch, active in active_stretches(f):
        last = active.iloc[-1]
        samples = active["gpu_samples"].fillna(0)
        gpu_state = ("GPU stopped reporting (fallen off the bus?)" if samples.eq(0).all()
                     else "GPU released by the run" if active["gpu_run_id"].isna().all()
                     else "GPU still held by the run")
        xid = active["gpu_last_xid"].dropna()
        rows.append(_rank_finding(
            stretch, active, value=float(active["silence_seconds"].max()), baseline=last["step_interval_seconds"],
            threshold=float(active["limit_seconds"].iloc[0]), onset=active["last_step_time"].iloc[0],
            evidence={
                "last_step_time": pd.Timestamp(active["last_step_time"].iloc[0]).isoformat(),
                "silent_minutes": num(active["silence_seconds"].max() / 60, 1),
                "peers_progressing": bool(active["_peers_go_on"].any()),
                "peer_gpus_held": int(active["gpus_held"].max() - active["gpu_held"].fillna(False).astype(int).min()),
                "gpu_state": gpu_state,
                "gpu_utilization_pct": num(100 * active["gpu_utilization"].mean(), 1),
                "gpu_last_xid": int(xid.iloc[-1]) if not xid.empty else None,
            },
        ))
    return findings_frame(rows)


def gradient_skew(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A rank whose local gradient norm stays off its peers' median by `min_ratio` (either way)
    relative to its own usual ratio, for `min_minutes`. Needs `min_peers` peers: with only two
    ranks one cannot say which of them is off. Stays open while the rank stays `min_ratio` off
    its peers (its usual ratio adapts to a long skew)."""
    if frame.empty:
        return empty_findings()
    f = _ranked(frame)
    finite = f["grad_norm"].where(np.isfinite(f["grad_norm"].astype(float)))
    by_minute = [f["run_id"], f["minute"]]
    f["peer_grad_norm_loo"] = loo_median(finite, by_minute)
    f["peers"] = finite.notna().groupby([f["run_id"], f["minute"]]).transform("sum") - finite.notna().astype(int)
    f["ratio"] = finite / f["peer_grad_norm_loo"]
    f["skew"] = f["ratio"] / f["grad_norm_ratio_baseline"]
    log_limit = np.log(thresholds["min_ratio"])
    enough = f["peers"].ge(thresholds["min_peers"]) & f["peer_grad_norm_loo"].gt(0)
    sustain = enough & np.log(f["ratio"]).abs().ge(log_limit)
    entry = sustain & np.log(f["skew"]).abs().ge(log_limit) & f["baseline_minutes"].ge(thresholds["min_baseline_minutes"])
    f = _suspects(f, entry, _sustain=sustain)
    if f.empty:
        return empty_findings()
    f = mark_stretches(f, "entity_id", f["_entry"], sustain=f["_sustain"], min_minutes=thresholds["min_minutes"],
                       max_gap_minutes=thresholds["max_gap_minutes"])
    rows = []
    for stretch, active in active_stretches(f):
        ratio = float(active["ratio"].median())
        rows.append(_rank_finding(
            stretch, active, value=100 * ratio, baseline=100 * float(active["grad_norm_ratio_baseline"].iloc[0]),
            threshold=100 * thresholds["min_ratio"],
            evidence={
                "grad_norm": num(active["grad_norm"].median(), 4),
                "peer_grad_norm": num(active["peer_grad_norm_loo"].median(), 4),
                "ratio_to_peers": num(ratio, 3),
                "usual_ratio": num(active["grad_norm_ratio_baseline"].iloc[0], 3),
                "direction": "higher" if ratio > 1 else "lower",
                "peers": int(active["peers"].max()),
            },
        ))
    return findings_frame(rows)
