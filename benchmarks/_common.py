"""What every benchmark's results file records about the run (the commit and the machine), and its writer."""

import json
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from fuseflow.cli import atomic_write  # noqa: E402


def write_results(doc: dict, path: str) -> None:
    """Write the results file ``path`` (its folder made if missing): indented JSON, whole or not at all."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_write(path) as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def commit(dirty_paths=("fuseflow",)) -> str:
    """HEAD's hash, with ``+dirty`` when ``dirty_paths`` have uncommitted changes; ``unknown`` outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *dirty_paths], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip() if dirty_paths else ""
        return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine() -> dict:
    """Python, platform, CPU model, CPU count and memory (GB) of this machine."""
    cpu = platform.processor() or platform.machine()
    mem = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
        with open("/proc/meminfo") as f:
            mem = round(int(f.readline().split()[1]) / 2 ** 20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    return {"python": platform.python_version(), "platform": platform.platform(), "cpu": cpu,
            "cpus": os.cpu_count(), "memory_gb": mem}
