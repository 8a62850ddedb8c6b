"""Long simulations: a progress line while a kernel runs, and what a Ctrl-C leaves behind.

Both engines call ``report(tokens, cycles)`` about every :data:`PROGRESS_SECONDS` (the Python engine from its
scheduling loop, the compiled one from its own); :func:`reporter` gives that callable for ``run(progress=...)``.
"""

import sys
import time

#: seconds between two progress reports of a long run
PROGRESS_SECONDS = 0.5


class ProgressLine:
    """``report(tokens, cycles)`` of a long kernel: one line on stderr, redrawn in place on a terminal."""

    def __init__(self, name, stream=None):
        self.name, self.stream = name, stream or sys.stderr
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        self.shown = False
        self.tty = getattr(self.stream, "isatty", lambda: False)()

    def __call__(self, tokens, cycles):
        dt = max(time.perf_counter() - self.t0, 1e-9)
        cpu = max(time.process_time() - self.c0, 1e-9)
        line = (f"kernel {self.name}: {tokens / 1e6:.1f} M tokens, {cycles / 1e6:.2f} M cycles simulated "
                f"({tokens / dt / 1e6:.1f} M tokens/s wall, {tokens / cpu / 1e6:.1f} M tokens/s CPU, "
                f"{cycles / dt / 1e6:.2f} M cycles/s wall, {dt:.0f} s)")
        self.stream.write(("\r" + line + "\x1b[K") if self.tty else line + "\n")
        self.stream.flush()
        self.shown = True

    def close(self):
        if self.shown and self.tty:
            self.stream.write("\n")
            self.stream.flush()


def reporter(progress, kernel):
    """What ``run(progress=...)`` asks for: a callable as given, a :class:`ProgressLine` for True, else None."""
    if callable(progress):
        return progress
    return ProgressLine(kernel) if progress else None


def interrupted_stats(finished, kernel, partial, t0):
    """The counters a Ctrl-C leaves: the finished kernels' stats and the stopped kernel's ``partial = (cycles,
    {stream: output with a count})``, with their totals and the wall time since ``t0``."""
    cycles, outs = partial
    kernels = [{"name": ks["name"], "cycles": ks["cycles"], "tokens": ks["tokens"]} for ks in finished]
    kernels.append({"name": kernel, "cycles": cycles, "interrupted": True,
                    "tokens": sum(o.count for o in outs.values())})
    return {"kernels": kernels, "wall_seconds": time.perf_counter() - t0,
            "tokens": sum(x["tokens"] for x in kernels), "cycles": sum(x["cycles"] for x in kernels)}
