"""Every argument of every command line has ``--help`` text: the parsers each entry point really builds are
caught at their first parse (nothing runs) and walked, subcommands included."""

import argparse

import pytest

import fuseflow.__main__ as top


class _Caught(Exception):
    """Raised in place of parsing, carrying the parser the entry point built."""


def parser_of(monkeypatch, call):
    """The ArgumentParser that ``call()`` parses its arguments with."""
    def catch(self, args=None, namespace=None):
        raise _Caught(self)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", catch)
    with pytest.raises(_Caught) as exc:
        call()
    return exc.value.args[0]


def undocumented(parser, path):
    """``path``-qualified names of the arguments and subcommands of ``parser`` (recursively) without help."""
    missing = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helped = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if not helped.get(name):
                    missing.append(f"{path} {name} (subcommand)")
                missing += undocumented(sub, f"{path} {name}")
            continue
        name = "/".join(action.option_strings) or action.dest
        if not action.help or action.help == argparse.SUPPRESS or not action.help.strip():
            missing.append(f"{path}: {name}")
    return missing


def _dse_main():
    from fuseflow.dse.__main__ import main
    return main([])


def _correlation_main():
    from fuseflow.reports.correlation import main
    return main([])


#: (what a user types, how to reach its parser): every part of the ``fuseflow`` console script (and so of
#: ``python -m fuseflow``), both kinds of ``compile``, the delegated ``hw correlate``, and the module-only CLIs
ENTRY_POINTS = [(f"fuseflow {part}", (lambda p=part: top._main([p]))) for part in top.PARTS if part != "compile"]
ENTRY_POINTS += [
    ("fuseflow compile PROGRAM.ff", lambda: top._main(["compile", "x.ff"])),
    ("fuseflow compile MODEL", lambda: top._main(["compile", "gcn"])),
    ("fuseflow hw correlate", lambda: top._main(["hw", "correlate"])),
    ("python -m fuseflow.dse", _dse_main),
    ("python -m fuseflow.reports.correlation", _correlation_main),
]


@pytest.mark.parametrize("command, call", ENTRY_POINTS, ids=[c for c, _ in ENTRY_POINTS])
def test_every_argument_has_help(monkeypatch, command, call):
    if command == "fuseflow compile MODEL":
        pytest.importorskip("torch")
    parser = parser_of(monkeypatch, call)
    assert parser._actions, command
    assert undocumented(parser, command) == []


def test_the_walk_finds_a_missing_help():
    ap = argparse.ArgumentParser()
    ap.add_argument("kept", help="documented")
    ap.add_argument("bare")
    sub = ap.add_subparsers(dest="cmd")
    s = sub.add_parser("run")
    s.add_argument("--flag", action="store_true")
    assert undocumented(ap, "x") == ["x: bare", "x run (subcommand)", "x run: --flag"]


def test_every_part_is_listed_with_a_description(capsys):
    assert top._main(["--help"]) == 0
    out = capsys.readouterr().out
    for part, (_, doc) in top.PARTS.items():
        assert doc and f"  {part}" in out
    for task, (part, command, doc) in top.TASKS.items():
        assert part in top.PARTS and doc and f"  {task}" in out
