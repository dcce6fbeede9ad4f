"""Run a Dagster command module (`dagster_webserver`, `dagster._daemon`) with a slower code-server watch.

    python -m orchestration.service.dagster_process dagster_webserver -w WORKSPACE -h HOST -p PORT

Dagster's workspace polls each gRPC code server's id every second (`server_watcher.WATCH_INTERVAL`)
to notice a restarted server. `goodput ui` starts its code server once, with a fixed id, so a
30-second check loses nothing and saves ~0.5 CPU-s per minute idle (orchestration/service/ui.py).
The attribute is Dagster's own module global, read at each watch thread's start; if a later Dagster
drops it, the setting is simply not applied (the default poll still works).
"""

import runpy
import sys

from dagster._grpc import server_watcher

from orchestration.service.ui import WATCH_SECONDS


def main() -> None:
    if hasattr(server_watcher, "WATCH_INTERVAL"):
        server_watcher.WATCH_INTERVAL = WATCH_SECONDS
    module, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
