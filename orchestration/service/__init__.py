"""Running processes: `goodput ui` (webserver, daemon, code server, board), the distributed deployment
on one machine (PostgreSQL, Redis, Celery workers) and the Celery app its workers run."""
