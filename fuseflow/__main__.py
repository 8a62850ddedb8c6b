"""The ``fuseflow`` command: one entry point for every part (``fuseflow sim run ...``, ``fuseflow samml dot ...``)."""

import importlib
import sys

PARTS = {
    "samml": ("fuseflow.samml.__main__", "validate, describe (info), draw and list SAMML graphs; random sample "
                                         "inputs for a graph"),
    "sim": ("fuseflow.sim.__main__", "run the reference simulator"),
    "compile": ("fuseflow.compiler.__main__", "compile a PyTorch model (FILE.py:CLASS, or a bundled model) or an "
                                              "index-notation program (.ff) to graph.json"),
    "hw": ("fuseflow.hw.__main__", "build and verify hardware"),
    "boards": ("fuseflow.boards.__main__", "FPGA board builds, synthesis reports and the UART host bridge"),
    "datasets": ("fuseflow.datasets.__main__", "list the bundled graphs (Cora), describe a graph file (Planetoid, "
                                               "OGB, Matrix Market, SNAP)"),
    "dse": ("fuseflow.dse.__main__", "design-space experiments mirroring the paper's figures (list, run, "
                                     "evaluation)"),
    "demo": ("fuseflow.demo", "run the bundled end-to-end example"),
}

#: the tasks a user does most, as one word each: (part, its command, summary)
TASKS = {
    "simulate": ("sim", "run", "simulate a graph.json on input tensors (fuseflow sim run)"),
    "build": ("hw", "build", "elaborate a graph.json into Verilog and a manifest (fuseflow hw build)"),
    "rtl-sim": ("hw", "sim", "run the RTL on Verilator against the reference simulator (fuseflow hw sim)"),
    "correlate": ("hw", "correlate", "RTL-vs-simulator correlation report over a kernel suite (fuseflow hw correlate)"),
}


def main(argv=None):
    from .cli import main_guard
    return main_guard(_main, list(sys.argv[1:] if argv is None else argv))


def _main(argv):
    argv = list(argv)
    if not argv:
        from .cli import UsageError
        raise UsageError("arguments", f"give a part ({', '.join(PARTS)}); fuseflow -h lists them")
    if argv[0] in ("-h", "--help"):
        print("usage: fuseflow <task|part> [args...]    (fuseflow <task|part> --help: its options)\n\ntasks:")
        for name, (_, _, doc) in TASKS.items():
            print(f"  {name:9s} {doc}")
        print("\nparts:")
        for name, (_, doc) in PARTS.items():
            print(f"  {name:9s} {doc}")
        print("\noptions:\n  -h, --help   this list\n  --version    the installed version")
        return 0
    if argv[0] in ("-V", "--version"):
        from . import __version__
        print(f"fuseflow {__version__}")
        return 0
    part = argv.pop(0)
    if part in TASKS:                          # a task is its part's command: fuseflow build X = fuseflow hw build X
        part, command, _ = TASKS[part]
        argv.insert(0, command)
    if part not in PARTS:
        from .cli import UsageError
        raise UsageError(part, f"unknown task or part (tasks: {', '.join(TASKS)}; parts: {', '.join(PARTS)})")
    if part == "compile" and argv in (["-h"], ["--help"]):
        from .model_cli import parser as torch_parser
        torch_parser().print_help()
        print("\nindex-notation programs: fuseflow compile PROGRAM.ff -o OUT [--fuse ...] "
              "(fuseflow compile PROGRAM.ff --help)")
        return 0
    if part == "compile" and _is_torch_model(argv):
        from .model_cli import main as torch_main
        return torch_main(argv)
    try:
        module = importlib.import_module(PARTS[part][0])
    except ModuleNotFoundError as exc:
        print(f"error: {part}: not available in this installation ({exc.name} is missing)", file=sys.stderr)
        return 2
    if part == "compile" and (not argv or argv[0] != "compile"):
        argv = ["compile"] + argv
    return module.main(argv)


def _is_torch_model(argv):
    """``fuseflow compile model.py:Class`` or a bundled model name (not a .ff program, not 'compile ...')."""
    first = next((a for a in argv if not a.startswith("-")), "")
    if first == "compile" or first.endswith(".ff"):
        return False
    from .models_names import MODELS
    return ".py:" in first or first.endswith(".py") or first in MODELS


if __name__ == "__main__":
    sys.exit(main())
