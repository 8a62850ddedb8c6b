"""mypy is clean on the public API (issue 38, item 6): the package ships ``py.typed``, so the modules users import
(``fuseflow``, ``fuseflow.sim``, ``fuseflow.compiler``, the ``fuseflow.hw`` build and run functions,
``fuseflow.datasets``) must type-check. Which modules and how strictly: ``[tool.mypy]`` in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[1]


def test_public_api_type_checks(monkeypatch):
    monkeypatch.chdir(ROOT)                  # the config's paths are relative to the repository
    # the default cache (.mypy_cache in the repository): a warm run takes a few seconds, a cold one well under a minute
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml")])
    assert status == 0, f"mypy found errors:\n{stdout}{stderr}"
    assert "Success" in stdout, stdout


def test_py_typed_is_shipped():
    assert (ROOT / "fuseflow" / "py.typed").exists()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()     # in [tool.setuptools.package-data]
