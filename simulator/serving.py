"""Serving: an endpoint's metrics as the Prometheus pull writes them (latency quantiles, queue, KV
cache, request and preemption counters, following a daily load curve), its prediction log and the
outcomes that arrive later. The serving and quality faults' registered effects act here."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import numpy as np

from .common import dumps, epoch_ms, fake_hex, fault_window, iso, iso_array, secs, stream, to_ms
from .faults import effect, effects_with
from .faults.quality import LANGUAGES
from .faults.serving import QUANTILE_Z, SERVING_FIELDS
from .model import Endpoint, Fault, Scenario, ScenarioError, host_name


def version_at(endpoint: Endpoint, versions: list[tuple[float, str]], t: np.ndarray) -> list[str]:
    """The model version an endpoint serves at each time (seconds since the scenario start)."""
    out = [endpoint.model_version] * len(t)
    for at, version in versions:  # in time order
        for i in np.flatnonzero(t >= at).tolist():
            out[i] = version
    return out


def serving_lines(scenario: Scenario, endpoint: Endpoint, versions: list[tuple[float, str]]):
    """One serving_metrics record per metrics interval, with the fields and key order of
    ``sources.prometheus.pull_serving_metrics``: latency quantiles of lognormal distributions
    (slower under more load), queue, KV cache and cumulative request and preemption counters (a
    healthy engine preempts nothing). Traffic follows the endpoint's daily load curve
    (``diurnal``); the serving faults of the endpoint act here."""
    rng = stream(scenario.seed, "endpoint", endpoint.name)
    step = secs(endpoint.metrics_interval)
    t = np.arange(0.0, secs(scenario.duration), step)
    n = len(t)
    expected = endpoint.requests_per_second * step
    day = diurnal(scenario, endpoint, t)
    load = day * np.exp(rng.normal(0.0, 0.1, n))  # this window's traffic relative to the nominal rate
    requests = rng.poisson(expected * load)
    faults = [f for f in scenario.faults if f.target == f"endpoint:{endpoint.name}"]
    counters = SimpleNamespace(scenario=scenario, t=t, failure_ratio=np.full(n, endpoint.failure_ratio), restarts=[])
    for f, act in effects_with(faults, "serving_requests"):
        act(counters, f)
    failure_ratio, restarts = counters.failure_ratio, counters.restarts
    failures = rng.binomial(requests, failure_ratio)
    success_total = restarted_cumsum(requests - failures, restarts)
    failure_total = restarted_cumsum(failures, restarts)
    model = version_at(endpoint, versions, t)
    host = None if endpoint.host is None else host_name(endpoint.host)
    columns = {}
    for prefix, dist in zip(SERVING_FIELDS, (endpoint.ttft, endpoint.itl, endpoint.e2e)):
        jitter = np.exp(rng.normal(0.0, 0.03, n)) * np.sqrt(load)
        for q, z in QUANTILE_Z.items():
            columns[f"{prefix}_{q}_seconds"] = np.round(dist.p50 * np.exp(dist.sigma * z) * jitter, 6)
    e2e_mean = endpoint.e2e.p50 * np.exp(endpoint.e2e.sigma ** 2 / 2)
    columns["requests_waiting"] = rng.poisson(endpoint.requests_waiting * load ** 2).astype(float)
    columns["requests_running"] = rng.poisson(endpoint.requests_per_second * load * e2e_mean).astype(float)
    columns["kv_cache_usage_ratio"] = np.round(
        np.clip(endpoint.kv_cache_usage * load * np.exp(rng.normal(0.0, 0.05, n)), 0.0, 0.99), 6)
    preempted = serving_faults(scenario, endpoint, faults, t, load, columns, rng)
    columns["request_success_total"] = success_total.astype(float)
    columns["request_failure_total"] = failure_total.astype(float)
    columns["preemptions_total"] = restarted_cumsum(preempted, restarts)   # a restart resets it too
    abs_ms = epoch_ms(scenario.start) + to_ms(t)
    times = iso_array(0, abs_ms)
    rows = {k: v.tolist() for k, v in columns.items()}
    lines = [dumps({"time": times[i], "endpoint": endpoint.name, "model_version": model[i], "host": host,
                     **{k: rows[k][i] for k in columns}}) for i in range(n)]
    return abs_ms, lines


def diurnal(scenario: Scenario, endpoint: Endpoint, t: np.ndarray) -> np.ndarray:
    """The daily load curve at ``t`` (seconds since the start): 1 +- amplitude, peak at the peak hour (UTC)."""
    start = scenario.start
    hour = (start.hour + start.minute / 60 + start.second / 3600 + t / 3600.0) % 24
    return 1.0 + endpoint.diurnal_amplitude * np.cos(2 * np.pi * (hour - endpoint.diurnal_peak_hour) / 24)


def restarted_cumsum(values: np.ndarray, restarts: list[int]) -> np.ndarray:
    """A Prometheus counter over ``values`` that restarts from 0 at each index in ``restarts``."""
    total = np.cumsum(values).astype(float)
    for i in sorted(restarts):
        if 0 < i < len(total):
            total[i:] -= total[i - 1]
    return total


def serving_faults(scenario: Scenario, endpoint: Endpoint, faults: list[Fault], t: np.ndarray, load: np.ndarray,
                    columns: dict, rng: np.random.Generator) -> np.ndarray:
    """The endpoint's serving faults (registered ``serving`` effects), applied to its columns;
    returns the preemptions in each metrics interval (exact zeros without a queue saturation).
    Draws from ``rng`` only when such a fault exists, so scenarios without one keep their numbers;
    the preemptions draw from a stream of their own per fault, so adding them changed no other value."""
    fr = SimpleNamespace(scenario=scenario, endpoint=endpoint, t=t, load=load, columns=columns, rng=rng,
                         running_full=float(np.max(columns["requests_running"])) if len(t) else 0.0,
                         preempted=np.zeros(len(t)))
    for k, f in enumerate(faults):
        lo, hi = fault_window(f, scenario)
        on = (t >= lo) & (t < hi)
        act = effect(f.type).serving
        if act is not None and on.any():
            act(fr, f, k, on, lo)
    return fr.preempted


def prediction_lines(scenario: Scenario, endpoint: Endpoint, versions: list[tuple[float, str]],
                     canary: dict | None = None):
    """Prediction records (shape of ``sources.importers.import_predictions``) and the outcomes of
    a share of them, ``outcome_delay`` x0.5-1.5 later; outcomes due after the span are not written
    (they have not arrived yet). With a ``canary``, a share of the requests from its ``at`` on is
    served by its version (drawn from a stream of its own)."""
    spec = endpoint.predictions
    rng = stream(scenario.seed, "predictions", endpoint.name)
    span = secs(scenario.duration)
    n = int(rng.poisson(spec.per_minute * span / 60.0))
    t = np.sort(rng.uniform(0.0, span, n))
    abs_ms = epoch_ms(scenario.start) + to_ms(t)
    times = iso_array(0, abs_ms)
    model = version_at(endpoint, versions, t)
    if canary is not None:
        routed = (t >= canary["at"]) & (stream(scenario.seed, "canary", endpoint.name).uniform(size=n) < canary["canary_share"])
        model = [canary["model_version"] if r else m for m, r in zip(model, routed.tolist())]
    labels = spec.labels
    predicted = rng.integers(0, len(labels), n)
    confidence = np.round(rng.beta(5.0, 2.0, n), 4)
    prompt_tokens = rng.integers(8, 2048, n)
    max_tokens = rng.choice([64, 128, 256, 512], n)
    language = rng.integers(0, len(LANGUAGES), n)
    temperature = np.round(rng.uniform(0.0, 1.0, n), 2)
    gets_outcome = rng.uniform(size=n) < spec.outcome_share
    delay = secs(spec.outcome_delay) * rng.uniform(0.5, 1.5, n)
    hit = rng.uniform(size=n)
    correct = hit < confidence
    other = (predicted + rng.integers(1, len(labels), n)) % len(labels)
    quality_faults(scenario, endpoint, versions, t, hit, confidence, correct, prompt_tokens, language, temperature)
    lines, outcome_ms, outcome_lines = [], [], []
    for i in range(n):
        request_id = str(uuid.UUID(fake_hex(f"{scenario.seed}/{endpoint.name}/request/{i}", 32)))
        lines.append(dumps({
            "time": times[i], "endpoint": endpoint.name, "model_version": model[i], "request_id": request_id,
            "features": {"prompt_tokens": int(prompt_tokens[i]), "max_tokens": int(max_tokens[i]),
                         "language": LANGUAGES[int(language[i])], "temperature": float(temperature[i])},
            "prediction": labels[int(predicted[i])], "confidence": float(confidence[i])}))
        if gets_outcome[i] and t[i] + delay[i] < span:
            ms = int(abs_ms[i] + to_ms(np.array([delay[i]]))[0])
            outcome_ms.append(ms)
            outcome_lines.append(dumps({
                "time": iso(ms), "request_id": request_id, "endpoint": endpoint.name,
                "outcome": labels[int(predicted[i] if correct[i] else other[i])]}))
    return (abs_ms, lines), (np.array(outcome_ms, dtype=np.int64), outcome_lines)


def quality_faults(scenario: Scenario, endpoint: Endpoint, versions: list[tuple[float, str]], t: np.ndarray,
                   hit: np.ndarray, confidence: np.ndarray, correct: np.ndarray, prompt_tokens: np.ndarray,
                   language: np.ndarray, temperature: np.ndarray) -> None:
    """The endpoint's model-quality faults (registered ``quality`` effects), applied in place to
    the prediction columns between onset and end. Each draws from a stream of its own, and only
    when it acts, so other scenarios keep their bytes."""
    fr = SimpleNamespace(scenario=scenario, endpoint=endpoint, versions=versions, t=t, hit=hit, confidence=confidence,
                         correct=correct, prompt_tokens=prompt_tokens, language=language, temperature=temperature,
                         fail=lambda field, problem, fix: ScenarioError(scenario.source, field, problem, fix))
    mine = [f for f in scenario.faults if f.target == f"endpoint:{endpoint.name}"]
    for k, (f, act) in enumerate(effects_with(mine, "quality")):
        lo, hi = fault_window(f, scenario)
        act(fr, f, k, (t >= lo) & (t < hi), lo)
