"""README.md stays a short page for new users (issue 38, item 5): under 250 lines, links that resolve, no work-log
lines (run histories belong in git history and CHANGELOG.md), a Python example that parses, and numbers that name
the committed results file they come from."""

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")

#: "session 12", "tried ... and not kept", and dates (of runs)
WORK_LOG = re.compile(r"\bsession \d+|tried .* not kept|\b20\d\d-\d\d-\d\d\b", re.IGNORECASE)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _text():
    with open(README, encoding="utf-8") as f:
        return f.read()


def test_readme_is_short():
    n = len(_text().splitlines())
    assert n < 250, f"README.md has {n} lines; move details to docs/"


def test_relative_links_exist():
    missing = []
    for target in LINK.findall(_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue                                   # http(s):, mailto:, anchors
        path = target.split("#", 1)[0]
        if not os.path.exists(os.path.join(ROOT, path)):
            missing.append(target)
    assert not missing, f"README.md links to missing files: {missing}"


def test_no_work_log_lines():
    bad = [f"{i}: {line}" for i, line in enumerate(_text().splitlines(), 1) if WORK_LOG.search(line)]
    assert not bad, "work-log lines in README.md (history goes to git and CHANGELOG.md):\n" + "\n".join(bad)


def test_python_examples_parse():
    blocks = [body for lang, body in FENCE.findall(_text()) if lang == "python"]
    assert blocks, "README.md has no python example"
    for body in blocks:
        ast.parse(body)
    first = blocks[0]
    for call in ("fuseflow.compile(", ".check()", ".build(", ".rtl_sim()"):
        assert call in first, f"the README example no longer shows {call}"


def test_quoted_results_files_exist():
    """Every results file the README names (the source of each number it keeps) is committed."""
    text = _text()
    named = set(re.findall(r"benchmarks/results/[\w.-]+\.(?:json|md)", text))
    named |= set(re.findall(r"docs/correlation/[\w/.-]+\.md", text))
    assert named, "README.md names no results file"
    missing = sorted(p for p in named if not os.path.exists(os.path.join(ROOT, p)))
    assert not missing, f"README.md names results files that do not exist: {missing}"


def test_correlation_numbers_match_the_committed_report():
    text = _text()
    with open(os.path.join(ROOT, "docs", "correlation", "correlation.md"), encoding="utf-8") as f:
        report = f.read()
    m = re.search(r"compared (\d+) kernels, (\d+) of (\d+) outputs bit-identical, (\d+) of (\d+) cycle counts "
                  r"equal, R² = ([\d.]+)", text)
    assert m, "README.md's correlation row changed: update this test"
    n, bit, bit_of, cyc, cyc_of, r2 = m.groups()
    assert f"| kernels compared (RTL finished) | {n} of {n} |" in report
    assert f"| outputs bit-identical | {bit} of {bit_of} |" in report
    assert f"| cycle counts equal | {cyc} of {cyc_of} |" in report
    assert f"| R^2 (raw cycles, parity line) | {r2} |" in report


def test_cora_seconds_match_the_committed_results():
    import json
    with open(os.path.join(ROOT, "benchmarks", "results", "cora.json"), encoding="utf-8") as f:
        cora = json.load(f)
    rows = cora["rows"]
    m = re.search(r"in (\d+)-(\d+) s, checked against PyTorch; trained, it scores ([\d.]+) % in fixed point as "
                  r"in PyTorch \(`benchmarks/results/cora.json`\)", _text())
    assert m, "README.md's Cora sentence changed: update this test"
    lo, hi = int(m.group(1)), int(m.group(2))
    secs = [r["simulate_seconds"] for r in rows]
    assert all(r["check_ok"] for r in rows)
    assert round(min(secs)) == lo and round(max(secs)) == hi, secs
    acc = cora["accuracy"]
    fixed = {round(100 * r["test_accuracy"], 1) for r in acc["rows"]}
    assert fixed == {float(m.group(3))} == {round(100 * acc["pytorch_float32_test_accuracy"], 1)}
