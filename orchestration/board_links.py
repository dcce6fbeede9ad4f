"""Where the incident board answers, and the links into it that alerts and check metadata carry.

The base URL is `GOODPUT_BOARD_URL` (set it to the address people open, e.g. behind a proxy), else
the board's default on loopback. Links are plain `https://.../incidents/<id>`, never server paths.
No Dagster here (the CLI builds its parser from these constants): the runs' resource is orchestration/board_resource.py.
"""

from __future__ import annotations

from urllib.parse import quote

from orchestration.config.env import env_or

DEFAULT_BOARD_PORT = 3001
DEFAULT_BOARD_URL = f"http://127.0.0.1:{DEFAULT_BOARD_PORT}"
BOARD_URL_ENV = "GOODPUT_BOARD_URL"


def board_url(env_name: str = BOARD_URL_ENV, fallback: str = DEFAULT_BOARD_URL) -> str:
    """The board's base URL: the environment variable `env_name` where it is set, else `fallback`."""
    return env_or(env_name, fallback)


def incident_link(base: str, incident_id: str) -> str:
    return f"{base.rstrip('/')}/incidents/{quote(incident_id, safe='')}"


def run_link(base: str, run_id: str) -> str:
    return f"{base.rstrip('/')}/runs/{quote(run_id, safe='')}"


def endpoint_link(base: str, endpoint: str) -> str:
    return f"{base.rstrip('/')}/endpoints/{quote(endpoint, safe='')}"


def report_link(base: str, report_path: str) -> str:
    """A drift report (its path relative to GOODPUT_HOME, `reports/drift/...`) as served by the board."""
    return f"{base.rstrip('/')}/{quote(report_path.lstrip('/'))}"


def alert_links(base: str, alert: dict) -> dict[str, str]:
    """The board pages an alert is about: its incident, its run, its endpoint, the report its evidence names."""
    links = {"board_url": incident_link(base, alert["incident_id"])}
    if alert.get("run_id"):
        links["board_run_url"] = run_link(base, alert["run_id"])
    if alert.get("endpoint"):
        links["board_endpoint_url"] = endpoint_link(base, alert["endpoint"])
    report = (alert.get("evidence") or {}).get("report_path") if isinstance(alert.get("evidence"), dict) else None
    if report:
        links["board_report_url"] = report_link(base, report)
    return links
