"""FuseFlow-HW: fusion-centric compilation of sparse ML programs to SAMML dataflow graphs,
a cycle-level reference simulator, and Amaranth hardware for the same graphs."""

__version__ = "0.1.0"
