"""nbval runs the tutorials here as part of the test suite (``--nbval`` is in ``addopts``).

Each tutorial prepares the demo home it runs on with ``mnb.prepare_demo_home()``, whose
default is ``$MURMUR_NB_DEMO_HOME``. Unless the caller set that variable, the kernels nbval
starts (they inherit this process's environment) get a fresh folder for this test session,
so the tests never write into the reader's own ``~/.murmur-nb-demo`` and prove that the
notebooks need nothing prepared beforehand. ``nbval-sanitize.cfg`` names what differs from
run to run (a root kernel's sandbox uid) unless the command line gives another file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

_OWNED: list[str] = []

# Programs the tutorials run or refresh them with, not tests.
collect_ignore = ["census_hook.py", "refresh.py", "rogue_module.py"]


def pytest_configure(config: pytest.Config) -> None:
    if config.option.nbval_sanitize_with is None:  # what differs from run to run
        config.option.nbval_sanitize_with = str(Path(__file__).with_name("nbval-sanitize.cfg"))
    if "MURMUR_NB_DEMO_HOME" not in os.environ:
        folder = tempfile.mkdtemp(prefix="murmur-nb-nbval-")
        _OWNED.append(folder)
        os.environ["MURMUR_NB_DEMO_HOME"] = str(Path(folder) / "demo")


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _OWNED:
        if os.environ.get("MURMUR_NB_DEMO_HOME", "").startswith(folder):
            del os.environ["MURMUR_NB_DEMO_HOME"]
        shutil.rmtree(folder, ignore_errors=True)
    _OWNED.clear()
