"""FuseFlow-HW: fusion-centric compilation of sparse ML programs to SAMML dataflow graphs,
a cycle-level reference simulator, and Amaranth hardware for the same graphs."""

__version__ = "0.1.0"


def _take_signals_when_run_as_a_command():
    # `python -m fuseflow...` and the `fuseflow` script: SIGINT/SIGTERM give the one-line message and exit
    # 130/143 even while the command's (slow) imports run; a library import changes nothing.
    from . import cli
    if cli.started_as_command():
        cli.install_signal_handlers()


_take_signals_when_run_as_a_command()
