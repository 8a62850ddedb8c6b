"""A small progress bar on stderr (no dependency).

On a terminal the bar redraws one line in place::

    correlation [##########..........]  52/141  37%  spmv_csr/n16/d0.3  elapsed 4m10s  left ~7m

Elsewhere (a log file, CI) it prints one plain line per finished step instead (at most one per ``interval``
seconds when one is given, and always the last), so a background run's log still shows how far it got.
``enabled=False`` silences it. ``tick()`` redraws the elapsed time of a long step (elsewhere than on a
terminal only with an ``interval``).
"""

import sys
import time


def _fmt_seconds(s):
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """``with Progress(total, "label") as bar: ... bar.step(name)`` (``bar.note(name)`` before a long step)."""

    def __init__(self, total, label="", stream=None, enabled=True, width=24, interval=None):
        self.total = max(0, int(total))
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.width = width
        self.done = 0
        self.t0 = time.monotonic()
        self.current = ""
        try:
            self.tty = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.tty = False
        self._last_len = 0
        self.interval = interval
        self._last_line = None

    # -------------------------------------------------------------------------------------------
    def line(self):
        """The bar's text for the current state."""
        total = self.total or 1
        frac = min(1.0, self.done / total)
        fill = int(round(frac * self.width))
        elapsed = time.monotonic() - self.t0
        parts = [f"{self.label} " if self.label else "",
                 f"[{'#' * fill}{'.' * (self.width - fill)}] ",
                 f"{self.done:>{len(str(self.total))}}/{self.total} {frac * 100:3.0f}%"]
        if self.current:
            parts.append(f"  {self.current}")
        parts.append(f"  elapsed {_fmt_seconds(elapsed)}")
        if 0 < self.done < self.total:
            parts.append(f"  left ~{_fmt_seconds(elapsed / self.done * (self.total - self.done))}")
        return "".join(parts)

    def _draw(self, final=False):
        if not self.enabled:
            return
        text = self.line()
        if self.tty:
            pad = max(0, self._last_len - len(text))
            self.stream.write("\r" + text + " " * pad + ("\n" if final else ""))
            self._last_len = len(text)
        else:
            now = time.monotonic()
            if (self.interval and not final and self._last_line is not None
                    and now - self._last_line < self.interval):
                return
            self._last_line = now
            self.stream.write(text + "\n")
        self.stream.flush()

    def note(self, what):
        """Say what the next step is (redraws on a terminal only)."""
        self.current = what
        if self.tty:
            self._draw()

    def step(self, what=None, n=1):
        """One (or ``n``) steps finished."""
        self.done = min(self.total, self.done + n)
        if what is not None:
            self.current = what
        self._draw(final=self.done >= self.total if self.interval is not None else self.tty and self.done >= self.total)

    def tick(self):
        """Redraw (the elapsed time moves during a long step): on a terminal, and elsewhere when an ``interval`` is
        given (at most one line per interval)."""
        if self.tty or self.interval is not None:
            self._draw()

    def close(self):
        if self.enabled and self.tty and self.done < self.total:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


__all__ = ["Progress"]
