"""The incident board: the on-call view of one Goodput home, as web pages served on loopback.

Read-only over the warehouse (one short read-only connection per request; a held write lock answers
a "warehouse busy, retry" page, never a 500). Pages, one module each: `now` (open incidents and
today's goodput), `incident`, `run`, `cluster`, `endpoint`. Plotly draws the charts, from a copy of
plotly.js the board serves itself (no CDN). `goodput board` serves it alone, `goodput ui` beside
the Dagster webserver; `goodput report` saves the run page as one self-contained file.
"""
