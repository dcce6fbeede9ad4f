"""The serving baseline asset: per-endpoint minute series with rolling baselines, and the SLOs.

`serving_baselines` writes `serving_minutes` (schema: sql/migrations/007_serving.sql and
009_preemptions.sql) from `serving_metrics`: latency quantiles, queue, running requests, KV cache,
preemptions, request rate and error ratio per endpoint and minute, each with the endpoint's trailing median over `window_minutes`. It
also writes `serving_slos` from the `serving_slos:` section of GOODPUT_HOME/thresholds.yaml, so the
serving signals' SQL and analysts read the same objectives. The serving signals check this asset.
"""

import dagster as dg
import pandas as pd

from orchestration.config.thresholds import SLO_KEYS, ThresholdsResource
from orchestration.partitions import hourly, window_params
from orchestration.storage import sql
from orchestration.storage.warehouse import POOL, WarehouseResource, transaction


class ServingBaselineConfig(dg.Config):
    window_minutes: int = 120
    """Trailing window of the rolling medians: long enough that a regression's first half hour
    does not drag the baseline along, short enough that a daily load curve moves it by only a few
    percent (docs/signals.md, "Serving signals")."""


def slo_frame(slos: dict[str, dict[str, float]]) -> pd.DataFrame:
    """The `serving_slos` rows: one per endpoint, null where the endpoint sets no objective."""
    rows = [{"endpoint": endpoint, **{k: objectives.get(k) for k in SLO_KEYS}} for endpoint, objectives in sorted(slos.items())]
    return pd.DataFrame(rows, columns=["endpoint", *SLO_KEYS]).astype({k: "float64" for k in SLO_KEYS})


@dg.asset(
    deps=[dg.AssetDep("serving_metrics", partition_mapping=dg.TimeWindowPartitionMapping(start_offset=-2))],
    partitions_def=hourly,
    group_name="baselines",
    kinds={"duckdb"},
    pool=POOL,
)
def serving_baselines(
    context: dg.AssetExecutionContext, config: ServingBaselineConfig, warehouse: WarehouseResource,
    thresholds: ThresholdsResource,
) -> dg.MaterializeResult:
    """Per-endpoint minute series (TTFT and inter-token latency p50/p95/p99, requests waiting and
    running, KV-cache usage, request rate, error ratio with counter resets handled) with trailing
    median baselines (`serving_minutes`), and the configured per-endpoint SLOs (`serving_slos`)."""
    slos = slo_frame(thresholds.serving_slos())
    params = {**window_params(context.partition_time_window), "window_minutes": config.window_minutes}
    with warehouse.connect() as con, transaction(con, new_slos=slos):
        sql.run(con, "baselines/serving_slos")
        rows = sql.run(con, "baselines/serving_minutes", params).fetchone()[0]
    return dg.MaterializeResult(metadata={"serving_minutes": rows, "endpoints_with_slos": len(slos),
                                          "window_minutes": config.window_minutes})
