"""Serving faults (target ``endpoint:<name>``): slower engines, saturated queues and server restarts
with failing requests, applied to the endpoint's vLLM-style metrics."""

from __future__ import annotations

import numpy as np

from ..common import fault_window, stream
from .registry import FaultEffect, register

# z-scores of the quantiles the Prometheus pull writes (p50, p95, p99).
QUANTILE_Z = {"p50": 0.0, "p95": 1.6448536269514722, "p99": 2.3263478740408408}
SERVING_FIELDS = ("ttft", "itl", "e2e_latency")
# vLLM admits a waiting request as soon as KV-cache blocks free up and preempts the newest running
# sequence when the others' growth needs the blocks back: under an overload of magnitude x the rate,
# about a quarter of the excess arrivals are admitted and preempted again (a few a minute at 5%).
PREEMPTED_SHARE = 0.25


def _latency(fr, f, k, on, lo):
    for prefix in SERVING_FIELDS:
        for q in QUANTILE_Z:
            col = fr.columns[f"{prefix}_{q}_seconds"]
            col[on] = np.round(col[on] * (1.0 + f.magnitude), 6)


def _queue(fr, f, k, on, lo):
    # arrivals exceed capacity by magnitude x the rate: the queue grows that many per second
    columns, t = fr.columns, fr.t
    rate = fr.endpoint.requests_per_second * fr.load[on]
    queued = np.cumsum(f.magnitude * rate * np.diff(t[on], prepend=lo))
    columns["requests_waiting"][on] += np.round(queued)
    columns["requests_running"][on] = fr.running_full
    columns["kv_cache_usage_ratio"][on] = np.round(fr.rng.uniform(0.96, 0.99, int(on.sum())), 6)
    wait = queued / rate  # Little's law: the time a new arrival spends queued
    for prefix in ("ttft", "e2e_latency"):
        for q in QUANTILE_Z:
            col = columns[f"{prefix}_{q}_seconds"]
            col[on] = np.round(col[on] + wait, 6)
    expected = PREEMPTED_SHARE * f.magnitude * rate * np.diff(t[on], prepend=lo)
    fr.preempted[on] += stream(fr.scenario.seed, "preemptions", fr.endpoint.name, k).poisson(expected)


def _error_burst(fr, f):
    lo, hi = fault_window(f, fr.scenario)
    fr.failure_ratio[(fr.t >= lo) & (fr.t < hi)] = f.magnitude
    fr.restarts.append(int(np.searchsorted(fr.t, lo)))


register(FaultEffect(
    "latency_regression", "serving", ("endpoint",),
    "the endpoint serves x(1 + magnitude) slower: TTFT, inter-token and end-to-end latency quantiles at the "
    "same load (a slower engine config, kernel or model)", serving=_latency))
register(FaultEffect(
    "queue_saturation", "serving", ("endpoint",),
    "arrivals exceed capacity by a share (magnitude) of the request rate: requests waiting grow by that many "
    "per second, running requests and the KV cache pin at full, TTFT grows with the queue; the queue drains "
    "at the end", serving=_queue))
register(FaultEffect(
    "error_burst", "serving", ("endpoint",),
    "the server restarts at onset (request counters reset to 0) and a share (magnitude) of requests fail "
    "until the end", max_magnitude=1.0, serving_requests=_error_burst))
