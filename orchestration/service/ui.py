"""`goodput ui`: the Dagster webserver, the daemon, one code server and the incident board, as one group.

Why not `dagster dev` (issue 15, idle cost): `dagster dev` puts a proxy code server between the
webserver/daemon and the process that loads Goodput's code, and the webserver and the daemon each
ask it for its server id every second (to notice a reloaded code server). Measured idle on the demo
home: the proxy alone ~0.9 CPU-s per minute, the one-second polls ~0.5 more, against a budget of
1.2 for the whole tree (BENCHMARKS.md section 25). Here the code server is `dagster api grpc` with a
fixed server id, started once by this process; the webserver and the daemon reach it over loopback
and poll its id every `WATCH_SECONDS` instead (the id never changes while this process lives:
new code means restarting `goodput ui`). One process group: Ctrl-C, or ending the group, stops all.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

WATCH_SECONDS = 30.0
"""How often the webserver and the daemon check the code server's id (Dagster's default: 1 s)."""

CODE_SERVER_STOP_S = 5.0
"""How long the code server gets after SIGTERM before SIGKILL. Dagster's `api grpc` turns SIGTERM into an
interrupt, then waits forever for a termination event only its ShutdownServer call sets (measured: never
exits on SIGTERM alone); it holds no state, and a run it launched is a process of its own."""

START_TIMEOUT_S = 600.0
"""Longest wait for the code server to load Goodput's definitions (minutes on a loaded machine)."""

WORKSPACE = """\
# Written by `goodput ui`: the code server it started (dagster api grpc, fixed id) on loopback.
load_from:
  - grpc_server:
      host: 127.0.0.1
      port: {port}
      location_name: goodput
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_code_server(port: int, server: subprocess.Popen) -> None:
    """Until the code server accepts a connection: `dagster api grpc` binds its port only after it
    loaded the definitions. A plain socket, so this process never imports Dagster (~100 MB of RSS)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.poll() is not None:
            raise SystemExit(f"goodput ui: the code server exited with {server.returncode} while loading "
                             "orchestration.definitions (its error is above)")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return
        except OSError:   # not listening yet
            if time.monotonic() > deadline:
                raise SystemExit(f"goodput ui: the code server did not answer in {START_TIMEOUT_S:.0f} s") from None
            time.sleep(1.0)


def run_ui(home: Path, host: str, port: int, board_port: int, repo_root: Path) -> int:
    """Start the four processes and wait; returns the exit status of the first that ends."""
    python = sys.executable
    code_port = free_port()
    workspace = home / "dagster" / "workspace_ui.yaml"
    workspace.write_text(WORKSPACE.format(port=code_port))
    env = dict(os.environ)
    procs: list[subprocess.Popen] = []

    def stop(*_args) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()

    signal.signal(signal.SIGTERM, lambda *_a: (stop(), sys.exit(143)))
    try:
        procs.append(subprocess.Popen(
            [python, "-m", "dagster", "api", "grpc", "-m", "orchestration.definitions", "--location-name", "goodput",
             "--host", "127.0.0.1", "--port", str(code_port), "--fixed-server-id", f"goodput-{code_port}",
             "--log-level", "warning"], cwd=home, env=env))
        _wait_for_code_server(code_port, procs[0])
        procs.append(subprocess.Popen([python, "-m", "orchestration.service.dagster_process", "dagster_webserver",
                                       "-w", str(workspace), "-h", host, "-p", str(port)], cwd=home, env=env))
        procs.append(subprocess.Popen([python, "-m", "orchestration.service.dagster_process", "dagster._daemon", "run",
                                       "-w", str(workspace)], cwd=home, env=env))
        procs.append(subprocess.Popen([python, "-m", "board", "--home", str(home), "--host", host, "--port", str(board_port),
                                       "--dagster-url", f"http://{host}:{port}"], cwd=repo_root, env=env))
        while True:
            for proc in procs:
                if proc.poll() is not None:
                    return proc.returncode
            time.sleep(1.0)
    except KeyboardInterrupt:
        return 130
    finally:
        stop()
        for proc in procs:   # the code server (first) gets a few seconds, the others 30
            try:
                proc.wait(timeout=CODE_SERVER_STOP_S if proc is procs[0] else 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":   # `goodput ui` execs this: HOME HOST PORT BOARD_PORT REPO_ROOT
    home_arg, host_arg, port_arg, board_arg, repo_arg = sys.argv[1:6]
    sys.exit(run_ui(Path(home_arg), host_arg, int(port_arg), int(board_arg), Path(repo_arg)))
