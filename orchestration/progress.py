"""Progress for long work on a terminal: one status line, redrawn in place, silent elsewhere.

`Ticker` keeps a status line ("[3/8] detect 2026-11-30-02:00  12s, about 20s left") on stderr while
a step runs, redrawn twice a second by a thread so that the elapsed time moves even while one step
takes long. When stderr is not a terminal (CI, pipes, files) it writes no live line, but the CLI
never waits silently: once the work has lasted `QUIET_AFTER_SECONDS` it writes ONE plain line saying
what it waits for. `say()` prints a line to stdout without tearing the status.

Waits below the CLI (the warehouse's lock wait) report through `waiting(what)`: a no-op unless the
CLI installed the hook (`announce_waits()`), so a Dagster run never writes to the terminal; with
the hook, and no Ticker already speaking, the wait writes the same one line after 2 s.
"""

from __future__ import annotations

import sys
import threading
import time

CLEAR = "\r\x1b[K"  # carriage return + erase to end of line
QUIET_AFTER_SECONDS = 2.0
_live_tickers: list = []   # Tickers running now: a live line, or one plain line already said, covers waits below them
_wait_stream = None        # where waits announce themselves (set by the CLI), None: nowhere
_saying = threading.Lock() # a Ticker's thread and a wait below it decide "said yet?" one at a time


class WaitNotice:
    """One line on `stream` once a wait has lasted `after` seconds, saying what it waits for; at most once."""

    def __init__(self, what: str, stream, after: float = QUIET_AFTER_SECONDS, clock=time.monotonic, quiet_under_ticker=True):
        self.what, self.stream, self.after, self.clock = what, stream, after, clock
        self.quiet_under_ticker = quiet_under_ticker
        self.started = clock()
        self.said = False

    def poll(self) -> bool:
        """Write the line if the wait is long enough and nobody said it yet; returns whether it is said."""
        with _saying:
            return self._poll()

    def _poll(self) -> bool:
        if self.said or self.stream is None:
            return self.said
        if self.quiet_under_ticker and any(t.enabled or t.notice.said for t in _live_tickers):
            return self.said    # a live line shows the wait, or a Ticker's one line has said it
        waited = self.clock() - self.started
        if waited >= self.after:
            try:
                self.stream.write(f"goodput: waiting for {self.what} ({waited:.0f}s so far)\n")
                self.stream.flush()
            except (ValueError, OSError):   # a stream closed under us (a server's detached stderr): the wait goes on
                pass
            self.said = True
            if self.quiet_under_ticker:
                for ticker in _live_tickers:   # one line per wait: the Ticker around it stays quiet now
                    ticker.notice.said = True
        return self.said


def announce_waits(stream=None) -> None:
    """Let waits below the CLI say what they wait for (on stderr by default)."""
    global _wait_stream
    _wait_stream = stream if stream is not None else sys.stderr


def waiting(what: str) -> WaitNotice:
    """A notice for a wait that starts now; silent unless the CLI called `announce_waits()`."""
    return WaitNotice(what, _wait_stream)


def _seconds(value: float) -> str:
    return f"{value:.0f}s" if value < 120 else f"{value / 60:.1f} min"


class Ticker:
    """A live status line for work of `total` steps (or unknown length when `total` is None)."""

    def __init__(self, total: int | None = None, stream=None, interval: float = 0.5, enabled: bool | None = None,
                 clock=time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_tty(self.stream) if enabled is None else enabled
        # off a terminal: one plain line once the work has lasted 2 s (the CLI never waits silently)
        self.notice = WaitNotice("", None if self.enabled else self.stream, clock=clock, quiet_under_ticker=False)
        self.total = total
        self.interval = interval
        self.done = 0
        self.text = ""
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Ticker:
        _live_tickers.append(self)
        self._thread = threading.Thread(target=self._run, name="goodput-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        _live_tickers.remove(self)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self.enabled:
            with self._lock:
                self.stream.write(CLEAR)
                self.stream.flush()

    def update(self, text: str) -> None:
        """Set what is being done now."""
        with self._lock:
            self.text = text
        self._draw()

    def step(self, n: int = 1) -> None:
        """Count finished steps (for the share done and the time left)."""
        with self._lock:
            self.done += n

    def say(self, message: str) -> None:
        """Print a line to stdout; the status line is cleared first and redrawn after."""
        with self._lock:
            if self.enabled:
                self.stream.write(CLEAR)
                self.stream.flush()
            print(message, flush=True)
        self._draw()

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        parts = [self.text, _seconds(elapsed)]
        if self.total:
            parts.insert(0, f"[{min(self.done + 1, self.total)}/{self.total}]")
            if self.done:
                left = elapsed / self.done * (self.total - self.done)
                parts.append(f"about {_seconds(left)} left")
        return "  ".join(p for p in parts if p)

    def _draw(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.stream.write(CLEAR + self.line())
            self.stream.flush()

    def tick(self) -> None:
        """Redraw the live line (terminal), or say the one plain line once it is due (elsewhere)."""
        if self.enabled:
            self._draw()
        elif not self.notice.said:
            with self._lock:
                self.notice.what = self.text or "work in progress"
            self.notice.poll()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()


def _is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
