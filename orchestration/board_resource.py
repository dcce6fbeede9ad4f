"""The incident board as a Dagster resource: the base URL that links in check metadata open
(orchestration/board_links.py builds the links)."""

from __future__ import annotations

import dagster as dg

from orchestration.board_links import BOARD_URL_ENV, DEFAULT_BOARD_URL, board_url, incident_link, report_link


class BoardResource(dg.ConfigurableResource):
    """The incident board's base URL, for links in check metadata: the variable `url_env` names it
    (GOODPUT_BOARD_URL), read where and when a step runs, not when the code location loads (the UI shows
    the variable's name, like a `dg.EnvVar`); `url` where it is unset (default: the board on loopback)."""

    url_env: str = BOARD_URL_ENV
    url: str = DEFAULT_BOARD_URL

    def base(self) -> str:
        return board_url(self.url_env, self.url)

    def incident(self, incident_id: str) -> str:
        return incident_link(self.base(), incident_id)

    def report(self, report_path: str) -> str:
        return report_link(self.base(), report_path)
