"""Loss detectors of the training family: a non-finite loss, spikes and divergences (excursions
above the run's own trailing loss) and plateaus (progress short of the run's own fitted curve).
Conventions as in checks/detectors_training.py."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from checks.detectors import empty_findings
from checks.toolkit import (
    counter_increase,
    jitter,
    num,
    prepare,
    previous,
    rolling,
    rows_rolling,
    run_findings,
    stretch_ids,
    stretch_total,
    window_text,
)

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
    f = prepare(frame, "run_id", "minute")
    ranks = pd.to_numeric(f["ranks_reporting"], errors="coerce").fillna(1.0).clip(lower=1.0)
    f["nonfinite_losses"] = pd.to_numeric(f["nonfinite_losses"], errors="coerce").fillna(0.0)
    nonfinite_steps = f["nonfinite_losses"] / ranks
    nan_increase = counter_increase(f, "nan_iterations_total") if "nan_iterations_total" in f else 0.0
    f["nonfinite_steps"] = np.fmax(nonfinite_steps, nan_increase)
    flagged = f["nonfinite_steps"] > 0
    stretch = stretch_ids(f, flagged, thresholds["bridge_minutes"], consecutive=False)
    so_far = stretch_total(f["nonfinite_steps"], stretch)
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
                "nonfinite_steps": num(bad, 1),
                "nonfinite_records": int(span["nonfinite_losses"].fillna(0).sum()),
                "steps_in_window": int(steps),
                "nonfinite_share_pct": num(100.0 * bad / steps, 1) if steps else None,
                "nan_iterations_total": num(span["nan_iterations_total"].max(), 0) if "nan_iterations_total" in span else None,
                "last_finite_loss": num(finite.iloc[-1], 4) if not finite.empty else None,
                "first_nonfinite": f"{span['minute'].min():%Y-%m-%d %H:%M} UTC",
                "last_step": num(span["last_step"].max(), 0),
                "baseline_note": "a healthy run logs no non-finite loss",
                "window": window_text(span),
            },
        }

    return run_findings(f, qualified, stretch, build)


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
    f = prepare(frame, "run_id", "minute", "loss")
    f = f[f["loss"] > 0].reset_index(drop=True)
    y = np.log(f["loss"].astype(float))
    smooth = rows_rolling(f, y, 5, "median")
    f["log_loss"] = y
    f["ref"] = rolling(f, smooth, ref_minutes, "min")
    f["history"] = rolling(f, y, ref_minutes, "count").fillna(0)
    f["noise"] = jitter(f, y, ref_minutes)
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
    stretch = stretch_ids(f, f["elevated"], thresholds["bridge_minutes"])
    in_s = stretch.notna()
    # 3-minute median within the stretch only, so pre-stretch minutes never lower it
    smoothed = pd.Series(np.nan, index=f.index)
    if in_s.any():
        smoothed = f["excess"][in_s].groupby(stretch[in_s]).rolling(3, min_periods=1).median() \
            .reset_index(level=0, drop=True).reindex(f.index)
    f["minutes_elevated"] = stretch_total(f["elevated"], stretch)
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
            "loss": num(hits["loss"].iloc[-1], 4),
            "loss_peak": num(span["loss"].max(), 4),
            "loss_baseline": num(baseline, 4),
            "rise_pct": num(100.0 * value, 1),
            "peak_rise_pct": num(100.0 * float(np.expm1(span["excess"].max())), 1),
            "threshold_pct": num(100.0 * float(np.expm1(first["rise_threshold"])), 1),
            "noise_pct": num(100.0 * first["noise"], 2),
            "minutes_elevated": int(span["elevated"].sum()),
            "baseline_window_minutes": int(thresholds["ref_minutes"]),
            "first_step": num(span["last_step"].min(), 0),
            "last_step": num(hits["last_step"].max(), 0),
            "grad_norm": num(hits["grad_norm"].iloc[-1], 4) if "grad_norm" in hits else None,
            "learning_rate": num(hits["learning_rate"].iloc[-1], 8) if "learning_rate" in hits else None,
            "window": window_text(span),
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

    return run_findings(f, qualified, ext, build)


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

    return run_findings(f, f["diverging"], stretch, build)


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
    spike's or divergence's). Windows holding an elevated minute are not judged: a spike's decaying
    tail is a setback the spike signal reports, not a plateau. Quiet until the fit holds
    `min_fit_minutes` minutes.
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
    lr_step = (previous(f, lr) - lr) > np.log1p(thresholds["lr_step_ratio"])   # drops (a warm-up only rises)
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
        "n": rolling(f, xf, win, "count", closed="right", by=regime),
        "sx": rolling(f, xf, win, "sum", closed="right", by=regime),
        "sy": rolling(f, yf, win, "sum", closed="right", by=regime),
        "sxx": rolling(f, xf * xf, win, "sum", closed="right", by=regime),
        "sxy": rolling(f, xf * yf, win, "sum", closed="right", by=regime),
        "syy": rolling(f, yf * yf, win, "sum", closed="right", by=regime),
        "sx3": rolling(f, xf**3, win, "sum", closed="right", by=regime),
        "sx4": rolling(f, xf**4, win, "sum", closed="right", by=regime),
        "sxxy": rolling(f, xf * xf * yf, win, "sum", closed="right", by=regime),
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
        "xbar": rolling(f, x, thresholds["block_minutes"], "mean", closed="right"),
        "ybar": rolling(f, y, thresholds["block_minutes"], "mean", closed="right"),
        "block_n": rolling(f, y, thresholds["block_minutes"], "count", closed="right"),
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
    # A window that holds a loss excursion (a spike, the start of a divergence) measures the setback
    # and its decaying tail, not the curve: the loss is still coming back down, which is the spike's
    # to report. Only windows clear of every elevated minute (both blocks and between) are judged.
    span = thresholds["window_minutes"] + thresholds["block_minutes"]
    clear = rolling(f, f["elevated"].astype(float), span, "max", closed="right").fillna(0.0) == 0.0
    f["flagged"] = (
        (f["fit_n"] >= thresholds["min_fit_minutes"])
        & (f["predicted"] >= f["needed"])
        & (f["observed"] <= thresholds["max_observed_fraction"] * f["predicted"])
        & (f["shortfall"] >= thresholds["z"] * noise)
        & (f["shortfall"] >= thresholds["z_fit"] * f["resid_sigma"].fillna(np.inf))
        & flat
        & clear
    )
    stretch = stretch_ids(f, f["flagged"], thresholds["bridge_minutes"])
    count = stretch_total(f["flagged"], stretch)
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
                "observed_improvement_pct": num(100.0 * float(np.expm1(first["observed"])), 2),
                "predicted_improvement_pct": num(100.0 * float(np.expm1(first["predicted"])), 2),
                "threshold_pct": num(100.0 * float(np.expm1(thresholds["max_observed_fraction"] * first["predicted"])), 2),
                "noise_pct": num(100.0 * first["noise"], 3),
                "fit_residual_pct": num(100.0 * first["resid_sigma"], 3),
                "loss": num(hits["loss"].iloc[-1], 4),
                "loss_window_start": num(np.exp(first["ybar_then"]), 4),
                "power_law_exponent": num(first["slope"], 4),
                "fit_minutes": int(first["fit_n"]),
                "window_minutes": int(thresholds["window_minutes"]),
                "last_step": num(hits["last_step"].max(), 0),
                "window": f"{first['tick'] - W:%Y-%m-%d %H:%M} .. {first['tick']:%H:%M} UTC",
            },
        }

    return run_findings(f, qualified, stretch, build)


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
