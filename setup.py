"""Builds the compiled simulator engine (fuseflow.sim._engine) with the system C++ compiler.

The extension is optional: on a machine without a C++20 compiler the package still installs, and
``fuseflow.sim`` runs the Python engine (``engine="auto"`` says so once). Everything else is in pyproject.toml.
"""

from glob import glob

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

sources = sorted(glob("fuseflow/sim/csrc/*.cpp") + glob("fuseflow/sim/csrc/ops/*.cpp"))

engine = Pybind11Extension(
    "fuseflow.sim._engine",
    sources,
    depends=sorted(glob("fuseflow/sim/csrc/*.hpp")),
    cxx_std=20,
    extra_compile_args=["-O3", "-fvisibility=hidden", "-ffp-contract=off"],
    optional=True,
)

setup(ext_modules=[engine], cmdclass={"build_ext": build_ext})
