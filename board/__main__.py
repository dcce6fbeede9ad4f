"""`python -m board --home DIR [--host H] [--port N] [--dagster-url URL]`: serve the board (as `goodput board`)."""

import sys

from orchestration.commands.board import main

sys.exit(main())
