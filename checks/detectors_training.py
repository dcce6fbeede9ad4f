"""Detectors of the training family: small pure functions over a run's per-minute series.

Each takes the frame its signal's SQL builds (one row per run per minute, from `run_minutes` /
`rank_minutes`, oldest first) and the signal's thresholds, and returns findings in the columns
of `registry.FINDING_COLUMNS`, one row per contiguous flagged stretch per run.

The frames carry history before the evaluated partition (the trailing windows the detectors
need, and the start of a stretch that began in an earlier hour). History rows have `tick` NULL:
they feed baselines, persistence and onsets but are never reported, so each flagged minute is
reported by exactly one partition's check.

Conventions shared by every detector here:
- a minute is `flagged` when it is abnormal on its own; a stretch is a run of flagged observed
  minutes (minutes without step records, e.g. an evaluation pause, neither flag nor break it
  unless the gap exceeds `bridge_minutes`); a stretch is reported from the minute it has
  persisted `min_minutes`;
- baselines are the run's own trailing history (robust: medians, MADs, minima), never a
  snapshot, and every detector stays quiet until that history holds `min_history_minutes`;
- the evidence names the value, the baseline, the threshold and the window behind the finding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from checks import episodes
from checks.detectors import empty_findings
from checks.registry import FINDING_COLUMNS

MAD_TO_SIGMA = 1.4826   # a normal distribution's sigma per unit of median absolute deviation
GIB = float(2**30)


# --------------------------------------------------------------------------------------------- #
# Shared machinery
# --------------------------------------------------------------------------------------------- #


def _prepare(frame: pd.DataFrame, needed: str | None = None) -> pd.DataFrame:
    """The frame sorted by run and minute with a clean index; rows without `needed` dropped."""
    f = frame
    if needed is not None:
        f = f[f[needed].notna()]
    f = f.sort_values(["run_id", "minute"], kind="stable").reset_index(drop=True)
    # one resolution for every time column (DuckDB hands out microseconds, pandas arithmetic nanoseconds)
    f["minute"] = pd.to_datetime(f["minute"]).astype("datetime64[ns]")
    f["tick"] = pd.to_datetime(f["tick"]).astype("datetime64[ns]")
    return f


def _rolling(f: pd.DataFrame, col: str | pd.Series, minutes: float, how: str, closed: str = "left",
             by: pd.Series | None = None) -> pd.Series:
    """A per-run time-based rolling statistic over the trailing `minutes` (the current minute
    excluded when `closed="left"`), aligned to `f`'s index; NaN where the window is empty.
    `by` splits runs further into contiguous segments (e.g. learning-rate regimes)."""
    values = f[col] if isinstance(col, str) else col
    g = pd.DataFrame({"run_id": f["run_id"] if by is None else by, "minute": f["minute"], "v": values.astype(float)})
    rolled = g.groupby("run_id", sort=False).rolling(f"{int(minutes)}min", on="minute", closed=closed, min_periods=1)["v"]
    out = getattr(rolled, how)()
    # Groups come out in order of appearance and `f` is sorted by run and minute: positions match.
    return pd.Series(out.to_numpy(), index=f.index)


def _rows_rolling(f: pd.DataFrame, values: pd.Series, rows: int, how: str) -> pd.Series:
    """A per-run rolling statistic over the last `rows` observed minutes (current included)."""
    return getattr(values.groupby(f["run_id"], sort=False).rolling(rows, min_periods=1), how)() \
        .reset_index(level=0, drop=True).reindex(f.index)


def _prev(f: pd.DataFrame, values: pd.Series) -> pd.Series:
    return values.groupby(f["run_id"], sort=False).shift(1)


def _jitter(f: pd.DataFrame, values: pd.Series, minutes: float) -> pd.Series:
    """The run's own minute-to-minute noise of `values` as a sigma (MAD of first differences
    over the trailing `minutes`): insensitive to slow trends, unlike a MAD of the levels."""
    v = values.astype(float)
    return MAD_TO_SIGMA * _rolling(f, (v - _prev(f, v)).abs(), minutes, "median") / np.sqrt(2.0)


def _counter_increase(f: pd.DataFrame, col: str) -> pd.Series:
    """Per-minute increase of a cumulative counter; a drop (a restarted process) counts from zero."""
    now = f[col].astype(float)
    before = _prev(f, now)
    delta = now - before
    # no earlier value in the frame (first row, or a gap): unknown, not an increase
    return delta.where((delta >= 0) | before.isna(), now).fillna(0.0).clip(lower=0.0)


def _stretches(f: pd.DataFrame, flagged: pd.Series, bridge_minutes: float, consecutive: bool = True) -> pd.Series:
    """Stretch id per flagged row (NaN elsewhere). A stretch is flagged rows of one run whose
    minutes lie at most `bridge_minutes` apart; with `consecutive`, an unflagged observed row
    between them ends it too."""
    flagged = flagged.fillna(False).astype(bool)
    gap = f["minute"].diff().dt.total_seconds().div(60.0)
    new_run = f["run_id"].ne(f["run_id"].shift())
    if consecutive:
        starts = flagged & (new_run | ~flagged.shift(fill_value=False) | gap.gt(bridge_minutes))
        ids = starts.cumsum().where(flagged)
    else:
        sub = f[flagged]
        sub_gap = sub["minute"].diff().dt.total_seconds().div(60.0)
        starts = sub["run_id"].ne(sub["run_id"].shift()) | sub_gap.gt(bridge_minutes)
        ids = starts.cumsum().reindex(f.index)
    return ids


def _placement(last: pd.Series) -> tuple[list, list]:
    hosts = last.get("hosts")
    gpus = last.get("gpus")
    return (sorted(hosts) if isinstance(hosts, (list, tuple, np.ndarray)) else [],
            sorted(gpus) if isinstance(gpus, (list, tuple, np.ndarray)) else [])


def _report(
    f: pd.DataFrame,
    qualified: pd.Series,
    stretch: pd.Series,
    build: Callable[[pd.DataFrame, pd.DataFrame], dict],
) -> pd.DataFrame:
    """One finding per stretch with qualified rows inside the evaluated partition (`tick` set).

    `build(stretch_rows, reported_rows)` returns value, baseline, threshold, evidence and may
    override onset; onset defaults to the stretch's first minute (possibly in an earlier hour).
    """
    keep = qualified.fillna(False).astype(bool) & f["tick"].notna() & stretch.notna()
    if not keep.any():
        return empty_findings()
    rows = []
    reported = f[keep].assign(_stretch=stretch[keep])
    whole = f.assign(_stretch=stretch)
    for sid, hits in reported.groupby("_stretch", sort=True):
        span = whole[whole["_stretch"] == sid]
        last = hits.iloc[-1]
        hosts, gpus = _placement(last)
        facts = build(span, hits)
        rows.append({
            "entity_id": last["run_id"],
            "onset": facts.pop("onset", span["minute"].min()),
            "detected_at": hits["tick"].min(),
            "last_seen": hits["tick"].max(),
            "run_id": last["run_id"],
            "rank": None,
            "hosts": hosts,
            "gpus": gpus,
            **facts,
        })
    return pd.DataFrame(rows, columns=list(FINDING_COLUMNS))


def _window(rows: pd.DataFrame) -> str:
    return f"{rows['minute'].min():%Y-%m-%d %H:%M} .. {rows['minute'].max() + pd.Timedelta(minutes=1):%H:%M} UTC"


def _num(value, digits: int = 4):
    """A JSON-able number (None for missing; an int when rounded to 0 digits)."""
    if value is None or pd.isna(value):
        return None
    return int(round(float(value))) if digits == 0 else round(float(value), digits)


# --------------------------------------------------------------------------------------------- #
# Non-finite loss
# --------------------------------------------------------------------------------------------- #


def non_finite_loss(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """Steps whose loss is NaN or infinite, or a rising "nan iterations" counter.

    No healthy run produces a non-finite loss (fp16 overflow skips a step but its loss stays
    finite), so there is no baseline to beat: a minute is flagged when any rank logged a
    non-finite loss or the run's `nan_iterations_total` rose. Sporadic non-finite steps less
    than `bridge_minutes` apart form one stretch; it is reported once it holds
    `min_nonfinite_steps` non-finite steps.
    """
    if frame.empty:
        return empty_findings()
    f = _prepare(frame)
    ranks = pd.to_numeric(f["ranks_reporting"], errors="coerce").fillna(1.0).clip(lower=1.0)
    f["nonfinite_losses"] = pd.to_numeric(f["nonfinite_losses"], errors="coerce").fillna(0.0)
    nonfinite_steps = f["nonfinite_losses"] / ranks
    nan_increase = _counter_increase(f, "nan_iterations_total") if "nan_iterations_total" in f else 0.0
    f["nonfinite_steps"] = np.fmax(nonfinite_steps, nan_increase)
    flagged = f["nonfinite_steps"] > 0
    stretch = _stretches(f, flagged, thresholds["bridge_minutes"], consecutive=False)
    so_far = f["nonfinite_steps"].where(stretch.notna()).groupby(stretch).cumsum()
    qualified = so_far >= thresholds["min_nonfinite_steps"]

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        bad = float(span["nonfinite_steps"].sum())
        steps = float(span["steps_completed"].fillna(0).sum())
        finite = span["loss"].dropna()
        return {
            "value": bad,
            "baseline": 0.0,
            "threshold": float(thresholds["min_nonfinite_steps"]),
            "evidence": {
                "nonfinite_steps": round(bad, 1),
                "nonfinite_records": int(span["nonfinite_losses"].fillna(0).sum()),
                "steps_in_window": int(steps),
                "nonfinite_share_pct": round(100.0 * bad / steps, 1) if steps else None,
                "nan_iterations_total": _num(span["nan_iterations_total"].max(), 0) if "nan_iterations_total" in span else None,
                "last_finite_loss": _num(finite.iloc[-1]) if not finite.empty else None,
                "first_nonfinite": f"{span['minute'].min():%Y-%m-%d %H:%M} UTC",
                "last_step": _num(span["last_step"].max(), 0),
                "baseline_note": "a healthy run logs no non-finite loss",
                "window": _window(span),
            },
        }

    return _report(f, qualified, stretch, build)


# --------------------------------------------------------------------------------------------- #
# Loss excursions: spike (recovers) and divergence (does not)
# --------------------------------------------------------------------------------------------- #


def loss_excursion(frame: pd.DataFrame, ref_minutes: float, min_rise_ratio: float, z: float,
                   min_history_minutes: float) -> pd.DataFrame:
    """The per-minute loss excursion above the run's recent best, with its noise and threshold.

    `excess` = log(loss) - the lowest 5-minute-median log loss of the trailing `ref_minutes`:
    how far the loss sits above the best it reached lately. A healthy, improving run sits at
    or just above that best (a learning-rate decay only lowers it), so the warm-up's falling
    loss and LR drops never look like excursions. `noise` is the run's own minute-to-minute
    jitter (MAD of log-loss differences, as a sigma). A minute is `elevated` when the excess
    exceeds both `z` noise sigmas and `min_rise_ratio` and the reference holds at least
    `min_history_minutes` observed minutes. Shared by the spike, divergence, plateau and
    grad-norm detectors so they agree on what "the loss is up" means.
    """
    f = _prepare(frame, "loss")
    f = f[f["loss"] > 0].reset_index(drop=True)
    y = np.log(f["loss"].astype(float))
    smooth = _rows_rolling(f, y, 5, "median")
    f["log_loss"] = y
    f["ref"] = _rolling(f, smooth, ref_minutes, "min")
    f["history"] = _rolling(f, y, ref_minutes, "count").fillna(0)
    f["noise"] = _jitter(f, y, ref_minutes)
    f["excess"] = y - f["ref"]
    f["rise_threshold"] = np.fmax(np.log1p(min_rise_ratio), z * f["noise"].fillna(0.0))
    f["elevated"] = (f["excess"] >= f["rise_threshold"]) & (f["history"] >= min_history_minutes)
    return f


def _loss_excursion(frame: pd.DataFrame, thresholds: Mapping[str, float], prefix: str = "") -> pd.DataFrame:
    return loss_excursion(frame, thresholds[prefix + "ref_minutes"], thresholds[prefix + "min_rise_ratio"],
                          thresholds[prefix + "z"], thresholds[prefix + "min_history_minutes"])


def _excursions(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> tuple[pd.DataFrame, pd.Series]:
    """Excursion frame plus per-stretch shape: minutes elevated so far, the peak so far, and
    whether the stretch has recovered (fallen `recovery_fraction` below its peak)."""
    f = _loss_excursion(frame, thresholds)
    stretch = _stretches(f, f["elevated"], thresholds["bridge_minutes"])
    in_s = stretch.notna()
    # 3-minute median within the stretch only, so pre-stretch minutes never lower it
    smoothed = pd.Series(np.nan, index=f.index)
    if in_s.any():
        smoothed = f["excess"][in_s].groupby(stretch[in_s]).rolling(3, min_periods=1).median() \
            .reset_index(level=0, drop=True).reindex(f.index)
    f["minutes_elevated"] = f["elevated"].astype(float).where(in_s).groupby(stretch).cumsum()
    f["peak"] = smoothed.groupby(stretch).cummax()
    f["recovering"] = in_s & (smoothed <= (1.0 - thresholds["recovery_fraction"]) * f["peak"])
    f["diverging"] = in_s & (f["minutes_elevated"] >= thresholds["divergence_minutes"]) & ~f["recovering"]
    return f, stretch


def _excursion_facts(span: pd.DataFrame, hits: pd.DataFrame, thresholds: Mapping[str, float], value: float) -> dict:
    first = span.iloc[0]
    baseline = float(np.exp(first["ref"]))
    return {
        "value": value,
        "baseline": baseline,
        "threshold": float(np.expm1(first["rise_threshold"])),
        "evidence": {
            "loss": _num(hits["loss"].iloc[-1]),
            "loss_peak": _num(span["loss"].max()),
            "loss_baseline": _num(baseline),
            "rise_pct": round(100.0 * value, 1),
            "peak_rise_pct": round(100.0 * float(np.expm1(span["excess"].max())), 1),
            "threshold_pct": round(100.0 * float(np.expm1(first["rise_threshold"])), 1),
            "noise_pct": round(100.0 * float(first["noise"]), 2) if pd.notna(first["noise"]) else None,
            "minutes_elevated": int(span["elevated"].sum()),
            "baseline_window_minutes": int(thresholds["ref_minutes"]),
            "first_step": _num(span["last_step"].min(), 0),
            "last_step": _num(hits["last_step"].max(), 0),
            "grad_norm": _num(hits["grad_norm"].iloc[-1]) if "grad_norm" in hits else None,
            "learning_rate": _num(hits["learning_rate"].iloc[-1], 8) if "learning_rate" in hits else None,
            "window": _window(span),
        },
    }


def loss_spike(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """A loss spike that recovers: the loss jumps above the run's recent best, then comes back.

    A stretch of elevated minutes (see `loss_excursion`) is a spike once it has lasted
    `min_minutes` and its excess has fallen `recovery_fraction` below the stretch's peak, or
    the loss is back under the threshold, without the stretch ever having qualified as a
    divergence. A jump that does not come down is a divergence, not a spike.
    """
    if frame.empty:
        return empty_findings()
    f, stretch = _excursions(frame, thresholds)
    if f.empty:
        return empty_findings()
    # The first observed minute after a stretch (back under the threshold) is its recovery too.
    after = ~f["elevated"] & f["run_id"].eq(f["run_id"].shift())
    ext = stretch.fillna(stretch.shift().where(after))
    diverged = f["diverging"].astype(float).groupby(ext).transform("max").fillna(0.0) > 0
    long_enough = f["minutes_elevated"].groupby(ext).transform("max").fillna(0) >= thresholds["min_minutes"]
    recovered = (f["recovering"] | (after & ext.notna()))
    qualified = recovered & long_enough & ~diverged

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        peak = float(np.expm1(span["excess"].max()))
        facts = _excursion_facts(span[span["elevated"]], hits, thresholds, peak)
        facts["evidence"]["recovered_to_pct"] = round(100.0 * float(np.expm1(hits["excess"].iloc[0])), 1)
        facts["evidence"]["recovery_fraction"] = thresholds["recovery_fraction"]
        return facts

    return _report(f, qualified, ext, build)


def loss_divergence(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """Loss climbing above the run's recent best and not coming back.

    A stretch of elevated minutes (see `loss_excursion`) is a divergence from the minute it
    has been elevated for `divergence_minutes` while still within `recovery_fraction` of its
    peak: the loss keeps rising (or stays up) instead of decaying like a spike.
    """
    if frame.empty:
        return empty_findings()
    f, stretch = _excursions(frame, thresholds)
    if f.empty:
        return empty_findings()

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        rise = float(np.expm1(hits["excess"].iloc[-1]))
        facts = _excursion_facts(span, hits, thresholds, rise)
        facts["evidence"]["divergence_minutes"] = int(thresholds["divergence_minutes"])
        return facts

    return _report(f, f["diverging"], stretch, build)


# --------------------------------------------------------------------------------------------- #
# Loss plateau
# --------------------------------------------------------------------------------------------- #


def loss_plateau(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """No improvement beyond what the run's own loss curve predicts.

    For each minute t, a power law log(loss) = a + b log(step) is fitted (least squares on
    rolling sums) to the run's minutes in the `fit_minutes` before the comparison window
    (t-W, t], W = `window_minutes`, so the fit never sees the window it judges; the warm-up
    (`fit_skip_minutes` from the run's first minute) and minutes with the loss up (spikes,
    divergences) are left out of the fit. The fit predicts the improvement over the window;
    the observed improvement compares `block_minutes`-mean log losses at both ends. A minute is
    flagged when the curve predicts at least `min_predicted_ratio` (a converged run predicts
    ~none and stays quiet) and `z` sigmas of the block means' noise, the observed improvement
    is at most `max_observed_fraction` of the prediction, the shortfall is `z` sigmas of the
    block means' noise and `z_fit` sigmas of the fit's residual scatter (how far the curve's
    extrapolation can be trusted), and the loss is flat rather than
    rising (within `flat_tolerance` of the prediction above its recent best: a rise is a
    spike's or divergence's). Quiet until the fit holds `min_fit_minutes` minutes.
    """
    if frame.empty:
        return empty_findings()
    f = _loss_excursion(frame, thresholds)
    f = f[f["last_step"].notna() & (f["last_step"] > 0)].reset_index(drop=True)
    if f.empty:
        return empty_findings()
    W = pd.Timedelta(minutes=thresholds["window_minutes"])
    # Progress is counted in applied updates: a step skipped for a NaN or an fp16 overflow does
    # not move the model along its curve (and is the non-finite-loss / loss-scale signals' to report).
    skipped = (pd.to_numeric(f["nan_iterations_total"], errors="coerce").fillna(0.0)
               + pd.to_numeric(f["skipped_iterations_total"], errors="coerce").fillna(0.0))
    applied = (f["last_step"].astype(float) - skipped).clip(lower=1.0)
    x = np.log(applied)
    x = x - x.groupby(f["run_id"]).transform("first")       # centred: keeps the sums well conditioned
    y = f["log_loss"]
    # The curve changes regime where the learning rate steps down (a decay, an annealing phase)
    # or the loss itself steps down:
    # the fit only uses the current regime, past its first `fit_skip_minutes` (the warm-up, or the
    # fast settling after an LR drop, would make the fit over-predict).
    lr = np.log(f["learning_rate"].astype(float).where(f["learning_rate"] > 0))
    new_run = f["run_id"].ne(f["run_id"].shift())
    lr_step = (_prev(f, lr) - lr) > np.log1p(thresholds["lr_step_ratio"])   # drops (a warm-up only rises)
    # A loss step down (far below its recent best, as after an LR drop the run does not report)
    # is a new regime too.
    lr_step |= f["excess"] <= -f["rise_threshold"]
    regime = (new_run | lr_step).cumsum()
    regime_start = f["minute"].groupby(regime).transform("first")
    if "first_minute" in f:    # the frame's first regime of a run began when the run did
        by_run = ~lr_step.groupby(regime).transform("first").astype(bool)
        regime_start = regime_start.where(~by_run, pd.to_datetime(f["first_minute"]).astype("datetime64[ns]"))
    settled = f["minute"] >= regime_start + pd.Timedelta(minutes=thresholds["fit_skip_minutes"])
    usable = ~f["elevated"] & settled
    xf, yf = x.where(usable), y.where(usable)
    win = thresholds["fit_minutes"]
    sums = pd.DataFrame({
        "n": _rolling(f, xf, win, "count", closed="right", by=regime),
        "sx": _rolling(f, xf, win, "sum", closed="right", by=regime),
        "sy": _rolling(f, yf, win, "sum", closed="right", by=regime),
        "sxx": _rolling(f, xf * xf, win, "sum", closed="right", by=regime),
        "sxy": _rolling(f, xf * yf, win, "sum", closed="right", by=regime),
        "syy": _rolling(f, yf * yf, win, "sum", closed="right", by=regime),
        "sx3": _rolling(f, xf**3, win, "sum", closed="right", by=regime),
        "sx4": _rolling(f, xf**4, win, "sum", closed="right", by=regime),
        "sxxy": _rolling(f, xf * xf * yf, win, "sum", closed="right", by=regime),
    })
    quad = _quadratic(sums)
    vxx = sums["sxx"] - sums["sx"] ** 2 / sums["n"]
    vxy = sums["sxy"] - sums["sx"] * sums["sy"] / sums["n"]
    vyy = sums["syy"] - sums["sy"] ** 2 / sums["n"]
    fit = pd.DataFrame({
        "run_id": f["run_id"], "minute": f["minute"] + W, "fit_n": sums["n"],
        "slope": vxy / vxx.where(vxx > 0),
        "resid_sigma": np.sqrt(((vyy - vxy**2 / vxx.where(vxx > 0)) / (sums["n"] - 2)).clip(lower=0.0)),
        "qb": quad[:, 0], "qc": quad[:, 1],
    })
    blocks = pd.DataFrame({
        "run_id": f["run_id"], "minute": f["minute"],
        "xbar": _rolling(f, x, thresholds["block_minutes"], "mean", closed="right"),
        "ybar": _rolling(f, y, thresholds["block_minutes"], "mean", closed="right"),
        "block_n": _rolling(f, y, thresholds["block_minutes"], "count", closed="right"),
    })
    earlier = blocks.assign(minute=blocks["minute"] + W).rename(
        columns={"xbar": "xbar_then", "ybar": "ybar_then", "block_n": "block_n_then"})
    f = f.join(blocks[["xbar", "ybar", "block_n"]])
    f = _asof(f, fit, W)
    f = _asof(f, earlier, W)
    # The straight power law over-predicts a curve that bends toward its floor; the quadratic in
    # log-log space follows the bend. The smaller of the two predictions is the conservative one.
    linear = -f["slope"] * (f["xbar"] - f["xbar_then"])
    curved = -(f["qb"] * (f["xbar"] - f["xbar_then"]) + f["qc"] * (f["xbar"] ** 2 - f["xbar_then"] ** 2))
    f["predicted"] = np.fmin(linear, curved)
    f["observed"] = f["ybar_then"] - f["ybar"]
    f["shortfall"] = f["predicted"] - f["observed"]
    # noise of the difference of two block means, from the run's minute-to-minute jitter
    noise = f["noise"].fillna(0.0) * np.sqrt(1.0 / f["block_n"] + 1.0 / f["block_n_then"])
    f["needed"] = np.fmax(np.log1p(thresholds["min_predicted_ratio"]), thresholds["z"] * noise)
    # flat, not rising: neither above its recent best nor above the window's start (a spike's or
    # divergence's rise is theirs to report)
    tolerance = np.fmax(thresholds["flat_tolerance"] * f["predicted"], thresholds["z"] * f["noise"].fillna(0.0))
    flat = (f["excess"] <= tolerance) & (f["observed"] >= -tolerance)
    f["flagged"] = (
        (f["fit_n"] >= thresholds["min_fit_minutes"])
        & (f["predicted"] >= f["needed"])
        & (f["observed"] <= thresholds["max_observed_fraction"] * f["predicted"])
        & (f["shortfall"] >= thresholds["z"] * noise)
        & (f["shortfall"] >= thresholds["z_fit"] * f["resid_sigma"].fillna(np.inf))
        & flat
    )
    stretch = _stretches(f, f["flagged"], thresholds["bridge_minutes"])
    count = f["flagged"].astype(float).where(stretch.notna()).groupby(stretch).cumsum()
    qualified = count >= thresholds["min_minutes"]

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        first = hits.iloc[0]
        # The plateau began roughly shortfall/predicted of the window before it was first flagged.
        lag = W * float(np.clip(first["shortfall"] / first["predicted"], 0.0, 1.0))
        return {
            "onset": (first["tick"] - lag).floor("min"),
            "value": float(first["observed"]),
            "baseline": float(first["predicted"]),
            "threshold": float(thresholds["max_observed_fraction"] * first["predicted"]),
            "evidence": {
                "observed_improvement_pct": round(100.0 * float(np.expm1(first["observed"])), 2),
                "predicted_improvement_pct": round(100.0 * float(np.expm1(first["predicted"])), 2),
                "threshold_pct": round(100.0 * float(np.expm1(thresholds["max_observed_fraction"] * first["predicted"])), 2),
                "noise_pct": _num(100.0 * first["noise"], 3),
                "fit_residual_pct": _num(100.0 * first["resid_sigma"], 3),
                "loss": _num(hits["loss"].iloc[-1]),
                "loss_window_start": _num(np.exp(first["ybar_then"])),
                "power_law_exponent": _num(first["slope"]),
                "fit_minutes": int(first["fit_n"]),
                "window_minutes": int(thresholds["window_minutes"]),
                "last_step": _num(hits["last_step"].max(), 0),
                "window": f"{first['tick'] - W:%Y-%m-%d %H:%M} .. {first['tick']:%H:%M} UTC",
            },
        }

    return _report(f, qualified, stretch, build)


def _quadratic(sums: pd.DataFrame) -> np.ndarray:
    """(b, c) of the least-squares y = a + b x + c x^2 from rolling sums, one row per window;
    NaN where the window holds too few points or is degenerate."""
    n = sums["n"].to_numpy(dtype=float)
    m = np.stack([
        np.stack([n, sums["sx"], sums["sxx"]], axis=-1),
        np.stack([sums["sx"], sums["sxx"], sums["sx3"]], axis=-1),
        np.stack([sums["sxx"], sums["sx3"], sums["sx4"]], axis=-1),
    ], axis=1).astype(float)
    rhs = np.stack([sums["sy"], sums["sxy"], sums["sxxy"]], axis=-1).astype(float)
    out = np.full((len(n), 2), np.nan)
    ok = (n >= 5) & np.isfinite(m).all(axis=(1, 2)) & np.isfinite(rhs).all(axis=1)
    if ok.any():
        ok[ok] = np.abs(np.linalg.det(m[ok])) > 1e-12
    if ok.any():
        out[ok] = np.linalg.solve(m[ok], rhs[ok][..., None])[:, 1:, 0]
    return out


def _asof(f: pd.DataFrame, other: pd.DataFrame, tolerance: pd.Timedelta) -> pd.DataFrame:
    """`f` with `other`'s columns as of each row's minute (same run, latest not after it)."""
    left = f.reset_index().sort_values("minute", kind="stable")
    right = other.sort_values("minute", kind="stable")
    merged = pd.merge_asof(left, right, on="minute", by="run_id", direction="backward", tolerance=tolerance)
    return merged.set_index("index").sort_index().rename_axis(None)


# --------------------------------------------------------------------------------------------- #
# Step-time regression
# --------------------------------------------------------------------------------------------- #


def step_time_regression(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The run's typical step got persistently slower: a change point, not a slow step.

    The minute's median step time is compared with the run's reference: the lowest trailing
    median (`step_seconds_baseline`) of the last `ref_minutes`, so a regression stays visible
    after the trailing median has absorbed it; noise is the median trailing MAD over the same
    span. A minute is flagged when the step is `min_increase_ratio` slower and `z` noise sigmas
    above the reference; a stretch is reported after `min_minutes`. Medians ignore single slow
    steps; checkpoint and evaluation pauses produce no step records. When most of the extra time
    is collective wait (`max_collective_share`), the slowdown is a straggler's or the network's
    and the distributed signals own it; this signal reports slowdowns in the run's own data or
    compute time.
    """
    if frame.empty:
        return empty_findings()
    f = _prepare(frame, "step_seconds")
    if f.empty:
        return empty_findings()
    ref_minutes = thresholds["ref_minutes"]
    # an episode carried in from the previous hour keeps the healthy reference it opened with
    f["ref"] = episodes.held_reference(f, _rolling(f, "step_seconds_baseline", ref_minutes, "min", closed="right"))
    f["ref_noise"] = MAD_TO_SIGMA * _rolling(f, "step_seconds_mad", ref_minutes, "median", closed="right")
    f["ref_collective"] = _rolling(f, "collective_seconds_baseline", ref_minutes, "min", closed="right")
    f["ref_data"] = _rolling(f, "data_seconds", thresholds["decompose_minutes"], "median")
    f["ref_compute"] = _rolling(f, "compute_seconds", thresholds["decompose_minutes"], "median")
    f["increase"] = f["step_seconds"] / f["ref"] - 1.0
    f["z"] = (f["step_seconds"] - f["ref"]) / f["ref_noise"].where(f["ref_noise"] > 0)
    extra = (f["step_seconds"] - f["ref"]).where(lambda s: s > 0)
    f["collective_share"] = ((f["collective_seconds"] - f["ref_collective"]) / extra).clip(lower=0.0)
    f["collective_share"] = f["collective_share"].fillna(0.0)
    f["flagged"] = (
        (f["baseline_minutes"] >= thresholds["min_history_minutes"])
        & (f["increase"] >= thresholds["min_increase_ratio"])
        & (f["z"].fillna(np.inf) >= thresholds["z"])
        & (f["collective_share"] < thresholds["max_collective_share"])
    )
    stretch = _stretches(f, f["flagged"], thresholds["bridge_minutes"])
    count = f["flagged"].astype(float).where(stretch.notna()).groupby(stretch).cumsum()
    qualified = count >= thresholds["min_minutes"]

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        first = span.iloc[0]
        now = hits.iloc[-1]
        ref = float(first["ref"])
        return {
            "value": float(now["step_seconds"]),
            "baseline": ref,
            "threshold": ref * (1.0 + thresholds["min_increase_ratio"]),
            "evidence": {
                "step_seconds": _num(now["step_seconds"]),
                "step_seconds_baseline": _num(ref),
                "held_reference": ref,
                "increase_pct": round(100.0 * float(now["increase"]), 1),
                "threshold_pct": round(100.0 * thresholds["min_increase_ratio"], 1),
                "z": _num(now["z"], 1),
                "noise_seconds": _num(first["ref_noise"]),
                "tokens_per_second": _num(now.get("tokens_per_second"), 1),
                "tokens_per_second_baseline": _num(first.get("tokens_per_second_baseline"), 1),
                "data_seconds": _num(now.get("data_seconds")),
                "compute_seconds": _num(now.get("compute_seconds")),
                "collective_seconds": _num(now.get("collective_seconds")),
                "collective_share_pct": round(100.0 * float(now["collective_share"]), 1),
                "data_seconds_change": _num(now["data_seconds"] - first["ref_data"]),
                "compute_seconds_change": _num(now["compute_seconds"] - first["ref_compute"]),
                "collective_seconds_change": _num(now["collective_seconds"] - first["ref_collective"]),
                "minutes_slow": int(len(span)),
                "baseline_window_minutes": int(ref_minutes),
                "window": _window(span),
            },
        }

    return _report(f, qualified, stretch, build)


# --------------------------------------------------------------------------------------------- #
# Gradient-norm spike
# --------------------------------------------------------------------------------------------- #


def grad_norm_spike(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The run's gradient norm far above its trailing baseline for at least a minute.

    The minute's median gradient norm (half of the minute's steps at least) is compared with the
    trailing median (`grad_norm_baseline`) on a log scale: flagged when it is `min_ratio` times
    the baseline and `z` robust sigmas above it (sigma of log grad norm = 1.4826 MAD / median).
    A stretch is reported once it spans `min_steps` steps, so one outlier step never alarms.
    Minutes where the loss itself is up (spike, divergence) or non-finite are left to the loss
    signals: there the grad norm is a symptom, not the finding.
    """
    if frame.empty:
        return empty_findings()
    f = _loss_excursion(frame, thresholds, "loss_") if frame["loss"].notna().any() else _prepare(frame)
    f = f[f["grad_norm"].notna() & (f["grad_norm"] > 0) & (f["grad_norm_baseline"] > 0)].reset_index(drop=True)
    if f.empty:
        return empty_findings()
    f["ratio"] = f["grad_norm"] / f["grad_norm_baseline"]
    sigma = (MAD_TO_SIGMA * f["grad_norm_mad"] / f["grad_norm_baseline"]).clip(lower=thresholds["min_sigma"])
    f["z"] = np.log(f["ratio"]) / sigma
    loss_up = f["elevated"].fillna(False) if "elevated" in f else False
    f["flagged"] = (
        (f["baseline_minutes"] >= thresholds["min_history_minutes"])
        & (f["ratio"] >= thresholds["min_ratio"])
        & (f["z"] >= thresholds["z"])
        & ~loss_up
        & ~(pd.to_numeric(f["nonfinite_losses"], errors="coerce") > 0)
    )
    stretch = _stretches(f, f["flagged"], thresholds["bridge_minutes"])
    steps = f["steps_completed"].astype(float).where(stretch.notna()).groupby(stretch).cumsum()
    qualified = steps >= thresholds["min_steps"]

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        peak = span.loc[span["ratio"].idxmax()]
        return {
            "value": float(peak["grad_norm"]),
            "baseline": float(peak["grad_norm_baseline"]),
            "threshold": float(peak["grad_norm_baseline"] * thresholds["min_ratio"]),
            "evidence": {
                "grad_norm": _num(peak["grad_norm"]),
                "grad_norm_max": _num(span["grad_norm_max"].max()),
                "grad_norm_baseline": _num(peak["grad_norm_baseline"]),
                "ratio": round(float(peak["ratio"]), 1),
                "threshold_ratio": thresholds["min_ratio"],
                "z": round(float(peak["z"]), 1),
                "loss": _num(peak["loss"]),
                "steps_in_burst": int(span["steps_completed"].sum()),
                "minutes": int(len(span)),
                "learning_rate": _num(peak.get("learning_rate"), 8),
                "baseline_window_minutes": _num(peak.get("baseline_window_minutes"), 0),
                "window": _window(span),
            },
        }

    return _report(f, qualified, stretch, build)


# --------------------------------------------------------------------------------------------- #
# Loss-scale collapse
# --------------------------------------------------------------------------------------------- #


def loss_scale_collapse(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """Mixed precision's dynamic loss scale collapsing (fp16): overflow after overflow.

    The minute's loss scale (lowest over ranks) is flagged when it is at or below `floor_scale`,
    or `min_drop_factor` below the run's trailing median scale of the last `ref_minutes` (a
    healthy scale oscillates within a factor of a few; the start-up search from 2^32 is over
    before `min_history_minutes`), while iterations keep being skipped (`skipped_iterations_total`
    rose within `skip_window_minutes`, when the run reports it). bf16/fp32 runs have no loss
    scale and are never flagged.
    """
    if frame.empty:
        return empty_findings()
    f = _prepare(frame, "loss_scale")
    f = f[f["loss_scale"] > 0].reset_index(drop=True)
    if f.empty:
        return empty_findings()
    f["ref"] = _rolling(f, "loss_scale", thresholds["ref_minutes"], "median")
    f["history"] = _rolling(f, "loss_scale", thresholds["ref_minutes"], "count").fillna(0)
    f["drop"] = f["ref"] / f["loss_scale"]
    skips = _counter_increase(f, "skipped_iterations_total")
    f["skipped_recent"] = _rolling(f, skips, thresholds["skip_window_minutes"], "sum", closed="right")
    reports_skips = f["skipped_iterations_total"].notna().groupby(f["run_id"]).transform("any")
    f["flagged"] = (
        (f["history"] >= thresholds["min_history_minutes"])
        & ((f["loss_scale"] <= thresholds["floor_scale"]) | (f["drop"] >= thresholds["min_drop_factor"]))
        & (~reports_skips | (f["skipped_recent"] >= thresholds["min_skipped"]))
    )
    stretch = _stretches(f, f["flagged"], thresholds["bridge_minutes"])
    count = f["flagged"].astype(float).where(stretch.notna()).groupby(stretch).cumsum()
    qualified = count >= thresholds["min_minutes"]

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        now = hits.iloc[-1]
        ref = float(span["ref"].iloc[0])      # the scale before the collapse (later medians absorb it)
        drop = ref / float(now["loss_scale"])
        skipped = span["skipped_iterations_total"]
        return {
            "value": float(now["loss_scale"]),
            "baseline": ref,
            "threshold": max(thresholds["floor_scale"], ref / thresholds["min_drop_factor"]),
            "evidence": {
                "loss_scale": _num(now["loss_scale"]),
                "loss_scale_baseline": _num(ref),
                "drop_factor": round(drop, 1),
                "halvings": round(float(np.log2(max(drop, 1.0))), 1),
                "threshold_drop_factor": thresholds["min_drop_factor"],
                "floor_scale": thresholds["floor_scale"],
                "skipped_iterations_total": _num(skipped.max(), 0),
                "skipped_in_window": _num(skipped.max() - skipped.min(), 0) if skipped.notna().any() else None,
                "baseline_window_minutes": int(thresholds["ref_minutes"]),
                "last_step": _num(now["last_step"], 0),
                "window": _window(span),
            },
        }

    return _report(f, qualified, stretch, build)


# --------------------------------------------------------------------------------------------- #
# Memory fragmentation
# --------------------------------------------------------------------------------------------- #


def memory_fragmentation(frame: pd.DataFrame, thresholds: Mapping[str, float]) -> pd.DataFrame:
    """The caching allocator fragmenting: reserved minus allocated growing, with symptoms.

    Per run and minute the SQL gives the worst rank's reserved-minus-allocated gap, inactive
    split bytes, the ranks' summed alloc retries and the highest reserved share of a GPU's
    memory. The gap (5-minute median) is compared with its lowest value over the trailing
    `window_minutes`; a minute is flagged when it grew by `min_growth_gib` and `z` sigmas of its
    own minute-to-minute jitter, and the growth shows as fragmentation: alloc retries rose in the
    window (`min_retries`) or inactive split bytes grew by `min_inactive_share` of the gap's
    growth (or the growth alone reaches `large_growth_gib`). Reported after `min_minutes`; the
    evidence gives the OOM headroom (reserved vs the GPU's memory).
    """
    if frame.empty:
        return empty_findings()
    f = _prepare(frame, "gap_bytes")
    if "first_minute" in f:   # the allocator settles during the run's first minutes: not a baseline
        warm = pd.to_datetime(f["first_minute"]).astype("datetime64[ns]") + pd.Timedelta(minutes=thresholds["warmup_minutes"])
        f = f[~(f["minute"] < warm)].reset_index(drop=True)
    if f.empty:
        return empty_findings()
    W = thresholds["window_minutes"]
    gap = _rows_rolling(f, f["gap_bytes"].astype(float), 5, "median")
    inactive = _rows_rolling(f, f["inactive_split_bytes"].astype(float), 5, "median")
    f["gap_ref"] = _rolling(f, gap, W, "min")
    f["history"] = _rolling(f, gap, W, "count").fillna(0)
    f["growth"] = gap - f["gap_ref"]
    f["inactive_growth"] = inactive - _rolling(f, inactive, W, "min")
    f["noise"] = _jitter(f, f["gap_bytes"], W)
    inactive_noise = _jitter(f, f["inactive_split_bytes"], W).fillna(0.0)
    retries = _counter_increase(f, "alloc_retries_total")
    f["retries_recent"] = _rolling(f, retries, W, "sum", closed="right")
    f["needed"] = np.fmax(thresholds["min_growth_gib"] * GIB, thresholds["z"] * f["noise"].fillna(0.0))
    symptoms = (
        (f["retries_recent"] >= thresholds["min_retries"])
        | (f["inactive_growth"] >= np.fmax(thresholds["min_inactive_share"] * f["growth"], 3.0 * inactive_noise))
        | (f["growth"] >= thresholds["large_growth_gib"] * GIB)
    )
    f["flagged"] = (f["history"] >= thresholds["min_history_minutes"]) & (f["growth"] >= f["needed"]) & symptoms
    stretch = _stretches(f, f["flagged"], thresholds["bridge_minutes"])
    count = f["flagged"].astype(float).where(stretch.notna()).groupby(stretch).cumsum()
    qualified = count >= thresholds["min_minutes"]

    def build(span: pd.DataFrame, hits: pd.DataFrame) -> dict:
        now = hits.iloc[-1]
        total = now.get("memory_total_bytes")
        reserved = float(now["memory_reserved_bytes"]) if pd.notna(now.get("memory_reserved_bytes")) else None
        return {
            "value": float(now["growth"]),
            "baseline": float(now["gap_ref"]),
            "threshold": float(now["needed"]),
            "evidence": {
                "gap_gib": round(float(now["gap_bytes"]) / GIB, 2),
                "gap_baseline_gib": round(float(now["gap_ref"]) / GIB, 2),
                "growth_gib": round(float(now["growth"]) / GIB, 2),
                "threshold_gib": round(float(now["needed"]) / GIB, 2),
                "inactive_split_gib": round(float(now["inactive_split_bytes"]) / GIB, 2),
                "inactive_growth_gib": round(float(now["inactive_growth"]) / GIB, 2),
                "alloc_retries_in_window": int(now["retries_recent"]),
                "alloc_retries_total": _num(now.get("alloc_retries_total"), 0),
                "ooms_total": _num(now.get("ooms_total"), 0),
                "worst_rank": _num(now.get("worst_rank"), 0),
                "reserved_gib": round(reserved / GIB, 2) if reserved is not None else None,
                "gpu_memory_gib": round(float(total) / GIB, 2) if pd.notna(total) else None,
                "reserved_pct": round(100.0 * reserved / float(total), 1) if reserved is not None and pd.notna(total) else None,
                "headroom_gib": round((float(total) - reserved) / GIB, 2) if reserved is not None and pd.notna(total) else None,
                "baseline_window_minutes": int(W),
                "window": _window(span),
            },
        }

    return _report(f, qualified, stretch, build)
