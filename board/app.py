"""The board's web app (Starlette): routes, templates, the served plotly.js, and the answers for a
busy or missing warehouse.

Each request opens the warehouse read-only for as long as it reads (`board.db.reading`) and renders
in a worker thread. A held write lock answers 503 "warehouse busy, retry" (the page reloads itself);
a missing warehouse or an unknown run, incident or endpoint answers a page that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2
import plotly
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Route

from board import cluster, db, endpoint, fmt, incident, now, run
from orchestration.storage.warehouse import WarehouseBusy, WarehouseMissing

TEMPLATES = Path(__file__).with_name("templates")
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=jinja2.select_autoescape(["html"]),
                             undefined=jinja2.ChainableUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(fmt.FILTERS)
    return env


@dataclass
class Board:
    """One home's board: where its warehouse is, where Dagster is, how pages link to each other."""

    home: Path
    dagster_url: str | None = None
    root: str = ""          # URL prefix of the board's pages ("" when served at /)
    wait_seconds: float = db.WAIT_SECONDS   # how long a page waits for a writing run's lock

    def __post_init__(self):
        self.env = environment()

    def render(self, template: str, inline_plotly: bool = False, **values) -> str:
        common = {"root": self.root, "dagster_url": self.dagster_url, "home": str(self.home),
                  "inline_plotly": PLOTLY_JS.read_text() if inline_plotly else None}
        return self.env.get_template(template).render(**common, **values)

    def page(self, build, template: str, missing: str | None = None, inline_plotly: bool = False) -> tuple[int, str]:
        """(status, html) of one page: `build(con)` gives its values (None: not found)."""
        try:
            with db.reading(self.home, self.wait_seconds) as con:
                values = build(con)
        except WarehouseBusy as error:
            return 503, self.render("busy.html", reason=str(error))
        except WarehouseMissing as error:
            return 503, self.render("missing.html", heading="No warehouse yet", message=str(error))
        if values is None:
            return 404, self.render("missing.html", heading="Not found", message=missing or "nothing here")
        return 200, self.render(template, inline_plotly=inline_plotly, **values)

    def run_page(self, run_id: str, inline_plotly: bool = False) -> tuple[int, str]:
        """The run page; `inline_plotly` puts plotly.js inside it (a file that stands alone)."""
        return self.page(lambda con: run.context(con, run_id), "run.html", f"no run {run_id!r} in the warehouse",
                         inline_plotly)


def create_app(home: Path, dagster_url: str | None = None) -> Starlette:
    board = Board(Path(home), dagster_url)

    async def respond(build, template: str, missing: str | None = None) -> Response:
        status, text = await run_in_threadpool(board.page, build, template, missing)
        headers = {"Retry-After": "5"} if status == 503 else None
        return HTMLResponse(text, status_code=status, headers=headers)

    async def now_page(request: Request) -> Response:
        return await respond(now.context, "now.html")

    async def incident_page(request: Request) -> Response:
        iid = request.path_params["incident_id"]
        return await respond(lambda con: incident.context(con, iid, board.dagster_url), "incident.html",
                             f"no incident {iid!r} in the warehouse")

    async def run_page(request: Request) -> Response:
        rid = request.path_params["run_id"]
        return await respond(lambda con: run.context(con, rid), "run.html", f"no run {rid!r} in the warehouse")

    async def cluster_page(request: Request) -> Response:
        return await respond(cluster.context, "cluster.html")

    async def endpoint_page(request: Request) -> Response:
        name = request.path_params["endpoint"]
        return await respond(lambda con: endpoint.context(con, name), "endpoint.html",
                             f"no endpoint {name!r} in the warehouse")

    async def report_page(request: Request) -> Response:
        relative = "reports/drift/" + request.path_params["path"]

        def build():
            try:
                with db.reading(board.home) as con:
                    return 200, endpoint.report_page(con, board.home, relative)
            except WarehouseBusy as error:
                return 503, board.render("busy.html", reason=str(error))

        status, text = await run_in_threadpool(build)
        if text is None:
            return HTMLResponse(board.render("missing.html", heading="Not found", message=f"no report {relative}"), 404)
        return HTMLResponse(text, status_code=status)

    async def plotly_js(request: Request) -> Response:
        return FileResponse(PLOTLY_JS, media_type="application/javascript", headers={"Cache-Control": "max-age=86400"})

    async def health(request: Request) -> Response:
        return Response("ok\n", media_type="text/plain")

    return Starlette(routes=[
        Route("/", now_page),
        Route("/incidents/{incident_id}", incident_page),
        Route("/runs/{run_id}", run_page),
        Route("/cluster", cluster_page),
        Route("/endpoints/{endpoint}", endpoint_page),
        Route("/reports/drift/{path:path}", report_page),
        Route("/static/plotly.min.js", plotly_js),
        Route("/healthz", health),
    ])
