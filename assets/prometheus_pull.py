"""The Prometheus source as an hourly-partitioned asset: pull the partition's window into the raw zone.

A misconfiguration fails the run; an unreachable Prometheus is logged as an error and recorded in
the materialization's metadata, so the hour's other sources still ingest (re-materialize the
partition, or backfill, once Prometheus is back). Credentials never reach the metadata, the log or
an error: URLs are shown redacted (sources/prometheus.py).

It writes raw-zone files only (`raw/gpu_samples/.../prometheus.jsonl`, `raw/serving_metrics/...`),
never the warehouse, so it needs no warehouse pool; the ingest assets load those files like any
other producer's, with the same idempotence and quarantine. Off (a no-op) when the sources file's
`sources:` list leaves `prometheus` out, or, with no list, when no URL is set.
"""

import dagster as dg

from orchestration.partitions import hourly
from orchestration.storage.raw_zone import RawZoneResource
from sources.mapping import ConfigError
from sources.prometheus import PrometheusError, PrometheusResource, pull_window, redact_url


@dg.asset(partitions_def=hourly, group_name="ingest", kinds={"prometheus"})
def prometheus_pull(context: dg.AssetExecutionContext, prometheus: PrometheusResource,
                    raw_zone: RawZoneResource) -> dg.MaterializeResult:
    """Pull the partition's hour from Prometheus (dcgm-exporter, nvidia_gpu_exporter, vLLM) over
    query_range into the raw zone; re-pulling an hour replaces its files, so ingest never doubles."""
    try:
        config = prometheus.config()
        sources = prometheus.sources_file()
    except ConfigError as error:
        raise dg.Failure(str(error)) from None
    if not sources.uses("prometheus", default=bool(config.url)):
        note = (f"prometheus is not in the sources file's `sources:` ({', '.join(sources.names())})"
                if sources.explicit else "no Prometheus URL configured")
        return dg.MaterializeResult(metadata={"enabled": False, "note": note})
    if not config.url:
        raise dg.Failure(f"{prometheus.config_file}: sources lists `prometheus` but no URL is set; "
                         "add `prometheus: {url: ...}` or set GOODPUT_PROMETHEUS_URL")
    window = context.partition_time_window
    try:
        result = pull_window(config, raw_zone.root, window.start, window.end, auth=prometheus.auth())
    except PrometheusError as error:
        # Not a failure of the run: the ingest assets downstream would be skipped, and the hour's other
        # sources (the agent, the client) must still land. The next pull of the hour fills it in.
        context.log.error(f"prometheus {context.partition_key}: {error}; this hour's Prometheus data is not pulled")
        return dg.MaterializeResult(metadata={"enabled": True, "url": redact_url(config.url), "error": str(error)})
    if result["rejected"]:
        context.log.warning(f"prometheus {context.partition_key}: {result['rejected']} sample(s) rejected (quarantined on ingest)")
    return dg.MaterializeResult(metadata={
        "enabled": True, "url": redact_url(config.url), "gpu_samples": result["gpu_samples"],
        "serving_metrics": result["serving_metrics"], "rejected": result["rejected"], "files": len(result["files"]),
    })
