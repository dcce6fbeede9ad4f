#!/usr/bin/env bash
# One set-up path for a new user and for CI: the Debian packages the tests run for real, then the
# project's venv with its dev extras. Safe to run again; installs only what is missing.
#   prometheus     tests/test_prometheus.py starts a real server on loopback
#   chromium       the browser tests (Playwright drives Debian's /usr/bin/chromium; never `playwright install`)
#   postgresql     the distributed-deployment tests (DuckLake catalog, Dagster instance storage)
#   redis-server   the Celery broker of the distributed-deployment tests
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
[ -x /usr/bin/chromium ] || need+=(chromium fonts-liberation)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# apt-get runs in the background while the venv installs (both mostly wait on the network and the disk): on a
# fresh machine the set-up takes the longer of the two, not their sum. Its output goes to a log, shown if it fails.
apt_pid=""
apt_log="$(mktemp)"
trap 'rm -f "$apt_log"' EXIT
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing Debian packages: ${need[*]}" >&2
        ( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" ) \
            >"$apt_log" 2>&1 &
        apt_pid=$!
    else
        echo "setup: missing Debian packages ${need[*]}; install them with: sudo apt-get install ${need[*]} (their tests skip until then)" >&2
    fi
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
# uv installs the same resolution as pip in a quarter of the time (measured on a fresh machine: 45 s against
# 162 s wall, BENCHMARKS.md section 30); pip does it where uv cannot be had.
# Bytecode: Python writes each module's bytecode at its first import and reuses it after, so only what is
# imported is ever compiled (~3,500 of the venv's ~34,000 modules: 7 CPU-s against 40 for all of them,
# BENCHMARKS.md section 55). Where PYTHONDONTWRITEBYTECODE is set (these machines set it; `.ci/run` unsets it)
# nothing is written and every process would compile all it imports, every time: there the venv and the project's
# own packages (an editable install never compiles them) are compiled here, once. Where apt-get is still running
# they are compiled too, in its wait.
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then compile=(--compile-bytecode); pip_compile=(); else compile=(); pip_compile=(--no-compile); fi
if .venv/bin/pip install -q uv 2>/dev/null && .venv/bin/uv --version >/dev/null 2>&1; then
    .venv/bin/uv pip install -q "${compile[@]}" --python .venv/bin/python -e '.[dev]'
else
    .venv/bin/pip install -q "${pip_compile[@]}" -e '.[dev]'
fi
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
    .venv/bin/python -m compileall -q -j 0 orchestration assets checks simulator sources board >/dev/null
elif [ -n "$apt_pid" ] && kill -0 "$apt_pid" 2>/dev/null; then
    .venv/bin/python -m compileall -q -j 0 .venv/lib/python3*/site-packages orchestration assets checks simulator \
        sources board >/dev/null || true   # ahead of time only: a module that fails here fails at its import too
fi
if [ -n "$apt_pid" ] && ! wait "$apt_pid"; then
    cat "$apt_log" >&2
    echo "setup: apt-get could not install ${need[*]} (its output is above); install them and run this again" >&2
    exit 1
fi
