"""`goodput agent`, `goodput scrape` and `goodput pull prometheus`: the real sources' commands
(`goodput import ...` is in imports.py).

- `goodput agent [--interval 10] [--home DIR] [--count N] [--stats] [--job-mapping-dir DIR]`: sample
  this host's GPUs through NVML into the raw zone until stopped (SIGTERM / Ctrl-C).
- `goodput scrape URL... [--interval 10] [--count N]`: scrape exporter pages directly into the raw
  zone where there is no Prometheus.
- `goodput pull prometheus --window START/END [--url URL] [--config FILE]`: pull a window from
  Prometheus into the raw zone (the `prometheus_pull` asset does this per hourly partition).
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone

from orchestration.commands.common import CliError, use_home


def cmd_agent(args) -> int:
    import pynvml

    from orchestration.config.home import raw_root
    from sources.mapping import ConfigError, require_source
    from sources.nvml_agent import AgentError, NvmlAgent, run_agent

    home = use_home(args.home)
    try:
        config = require_source(args.config or os.environ.get("GOODPUT_SOURCES_CONFIG"), "agent").agent
    except ConfigError as error:
        raise CliError(str(error)) from None
    interval = args.interval if args.interval is not None else config.interval_seconds
    stats_every = args.stats_every if args.stats_every is not None else config.stats_every
    if interval <= 0:
        raise CliError(f"--interval must be positive seconds, got {interval}")
    from orchestration.progress import Ticker

    agent = NvmlAgent(pynvml, host=args.host, job_mapping_dir=args.job_mapping_dir or config.job_mapping_dir)
    try:
        # NVML start-up and per-GPU discovery can take seconds on a big host: a status line on a
        # terminal (silent in a service's log).
        with Ticker() as ticker:
            ticker.update("starting NVML")
            agent.open(progress=lambda index, count, what: _discovery(ticker, index, count, what))
    except AgentError as error:
        raise CliError(f"agent: {error}") from None
    print(f"goodput agent: sampling {len(agent.gpus)} GPU(s) on {agent.host} every {interval:g} s "
          f"into {raw_root(home) / 'gpu_samples'}", file=sys.stderr, flush=True)
    stats = run_agent(agent, raw_root(home), interval=interval, count=args.count, stats_every=stats_every)
    if args.stats:
        print(f"goodput agent: {stats.samples} samples, {stats.records} records, "
              f"CPU {stats.cpu_ms_per_sample:.3f} ms per sample, lost GPUs: {stats.lost_gpus or 'none'}, "
              f"null fields: {dict(sorted(stats.unsupported.items())) or 'none'}", flush=True)
    return 0


def _discovery(ticker, index: int, count: int, what: str) -> None:
    ticker.total = count
    ticker.done = index
    ticker.update(f"agent: {what}")


def cmd_scrape(args) -> int:
    import time

    from orchestration.config.home import raw_root
    from sources.client import RawWriter
    from sources.exposition import scrape_once
    from sources.mapping import ConfigError, load_prometheus_config, require_source

    home = use_home(args.home)
    try:
        path = args.config or os.environ.get("GOODPUT_SOURCES_CONFIG")
        require_source(path, "scrape")
        config = load_prometheus_config(path)
    except ConfigError as error:
        raise CliError(str(error)) from None
    writers: dict[str, RawWriter] = {}

    def writer_for(host):
        return writers.setdefault(host, RawWriter(raw_root(home), "gpu_samples", f"{host}.scrape"))

    done = 0
    try:
        while True:
            totals = scrape_once(args.urls, writer_for, config)
            for failure in totals["failed"]:
                print(f"goodput scrape: {failure} (skipped this round)", file=sys.stderr, flush=True)
            done += 1
            if args.count is not None and done >= args.count:
                break
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    finally:
        for writer in writers.values():
            writer.close()
    if args.count is not None and totals["failed"] and len(totals["failed"]) == len(args.urls):
        raise CliError(f"no exporter answered: {'; '.join(totals['failed'])}")
    print(f"scraped {len(args.urls)} exporter(s) {done} time(s); last round {totals['records']} GPU record(s), "
          f"{totals['rejected']} rejected sample(s)")
    return 0


def _parse_window(text: str) -> tuple[datetime, datetime]:
    try:
        start, end = (datetime.fromisoformat(part.strip().replace("Z", "+00:00")) for part in text.split("/"))
    except ValueError:
        raise CliError(f"--window {text!r}: expected START/END in ISO-8601, e.g. 2026-11-30T03:00Z/2026-11-30T04:00Z") from None
    start, end = (t if t.tzinfo else t.replace(tzinfo=timezone.utc) for t in (start, end))
    if end <= start:
        raise CliError(f"--window {text!r}: END must be after START")
    return start, end


def cmd_pull(args) -> int:
    from orchestration.config.home import raw_root
    from sources.mapping import ConfigError, load_prometheus_config
    from sources.prometheus import PrometheusError, env_auth, pull_window

    home = use_home(args.home)
    start, end = _parse_window(args.window)
    try:
        config = load_prometheus_config(args.config or os.environ.get("GOODPUT_SOURCES_CONFIG"),
                                        url=args.url or os.environ.get("GOODPUT_PROMETHEUS_URL"))
        result = pull_window(config, raw_root(home), start, end, auth=env_auth())
    except (ConfigError, PrometheusError) as error:
        raise CliError(str(error)) from None
    print(f"pulled {result['gpu_samples']} GPU sample(s) and {result['serving_metrics']} serving record(s) "
          f"into {len(result['files'])} raw file(s); {result['rejected']} rejected")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("agent", help="sample this host's GPUs through NVML into the raw zone")
    p.add_argument("--home", help="GOODPUT_HOME (default: $GOODPUT_HOME or ./.goodput)")
    p.add_argument("--interval", type=float, help="seconds between samples (default: the sources file's, else 10)")
    p.add_argument("--count", type=int, help="stop after N samples (default: run until stopped)")
    p.add_argument("--host", help="host name to record (default: this machine's)")
    p.add_argument("--job-mapping-dir", help="folder with one file per GPU index or UUID holding its job id")
    p.add_argument("--stats", action="store_true", help="print samples taken and CPU cost per sample at exit")
    p.add_argument("--stats-every", type=int, help="log CPU cost every N samples (0: never; default 60)")
    p.add_argument("--config", help="sources YAML file with an `agent:` section (default: $GOODPUT_SOURCES_CONFIG)")
    p.set_defaults(func=cmd_agent)

    p = sub.add_parser("scrape", help="scrape dcgm-exporter / nvidia_gpu_exporter pages directly (no Prometheus)")
    p.add_argument("urls", nargs="+", help="exporter URLs, e.g. http://gpu-node-1:9400/metrics")
    p.add_argument("--home")
    p.add_argument("--interval", type=float, default=10.0, help="seconds between rounds (default 10)")
    p.add_argument("--count", type=int, help="stop after N rounds (default: run until stopped)")
    p.add_argument("--config", help="sources YAML file whose `prometheus:` section maps labels and metrics")
    p.set_defaults(func=cmd_scrape)

    p = sub.add_parser("pull", help="pull a time window from a source (prometheus) into the raw zone")
    p.add_argument("kind", choices=["prometheus"])
    p.add_argument("--window", required=True, help="START/END, ISO-8601 UTC")
    p.add_argument("--url", help="Prometheus base URL (default: the config file's, or $GOODPUT_PROMETHEUS_URL)")
    p.add_argument("--config", help="sources YAML file with a `prometheus:` section (default: $GOODPUT_SOURCES_CONFIG)")
    p.add_argument("--home")
    p.set_defaults(func=cmd_pull)
