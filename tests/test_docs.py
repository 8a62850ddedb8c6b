"""The pages under docs/ are for users (issue 38, item 5): no work-log lines (run histories go to git and
CHANGELOG.md), relative links that resolve, and an index (docs/README.md) that links every page.

Scope: the hand-written pages ``docs/*.md``. Not checked for work-log lines: CHANGELOG.md (history is its job),
the generated correlation reports under ``docs/correlation/`` (each header states when its run was made: a
report's date is data, not history) and the generated reference ``docs/reference/`` (written by ``make docs``).
"""

import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_readme import LINK, WORK_LOG  # noqa: E402  (one definition of a work-log line, README's)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")

#: hand-written pages allowed to quote a date, with the reason (none today)
WORK_LOG_EXEMPT = {}


def _pages():
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(DOCS, "*.md")))


def _read(name):
    with open(os.path.join(DOCS, name), encoding="utf-8") as f:
        return f.read()


def _links(text):
    """Markdown link targets outside code blocks and code spans (index notation such as `x[i](j)` is code)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    return LINK.findall(text)


def test_there_are_pages():
    assert "README.md" in _pages() and len(_pages()) > 5


def test_no_work_log_lines_in_docs():
    bad = []
    for name in _pages():
        if name in WORK_LOG_EXEMPT:
            continue
        for i, line in enumerate(_read(name).splitlines(), 1):
            if WORK_LOG.search(line):
                bad.append(f"docs/{name}:{i}: {line[:100]}")
    assert not bad, ("work-log lines in docs/ (dated runs, 'session N', 'tried ... not kept'): keep the current "
                     "numbers with their results file, move history to CHANGELOG.md or git:\n" + "\n".join(bad))


def test_docs_index_links_every_page():
    index = _read("README.md")
    linked = {t.split("#", 1)[0] for t in _links(index)}
    pages = [p for p in _pages() if p != "README.md"]
    missing = [p for p in pages if p not in linked]
    assert not missing, f"docs/README.md does not link: {missing}"
    assert "reference/ops.md" in linked, "docs/README.md does not link the generated op reference"


def test_relative_links_in_docs_exist():
    missing = []
    for name in _pages():
        for target in _links(_read(name)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not os.path.exists(os.path.join(DOCS, path)):
                missing.append(f"docs/{name}: {target}")
    assert not missing, "links to missing files:\n" + "\n".join(missing)


#: a generated block (a results table, the pipeline table) starts and ends with an HTML comment saying so
GENERATED_BEGIN = re.compile(r"<!--.*(:begin|generated)")
GENERATED_END = re.compile(r"<!--.*(:end|end of)")


def long_prose_lines(text):
    """Lines of prose longer than 120 characters: not in code blocks or generated blocks, not table rows, headings,
    HTML, links to web pages or a lone inline-code span (a command that cannot be broken)."""
    out, fence, generated = [], False, False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if GENERATED_BEGIN.search(line):
            generated = True
        elif GENERATED_END.search(line):
            generated = False
        if fence or generated or len(line) <= 120 or line.lstrip().startswith(("|", "#", "<")) or "http" in line \
                or re.fullmatch(r"\s*`[^`]+`[.,:;]?", line):
            continue
        out.append((n, line))
    return out


def test_long_prose_lines_are_found():
    prose = "word " * 30
    text = f"{prose}\n```\n{prose}\n```\n| {prose} |\n<!-- x:begin -->\n{prose}\n<!-- x:end -->\n`{'a' * 130}`\n"
    assert long_prose_lines(text) == [(1, prose)]


def test_prose_is_wrapped_at_120_characters():
    """README and every page of docs/: prose lines of at most 120 characters (issue 38)."""
    long = {name: long_prose_lines(_read(name)) for name in ["../README.md"] + _pages()}
    assert not {k: v for k, v in long.items() if v}, long
