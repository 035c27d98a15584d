"""The saved tutorials themselves: in step with their builder, small, and free of machine facts.

nbval (``--nbval`` in ``addopts``) re-runs every notebook and compares its outputs; these fast
checks cover what nbval cannot see: that the saved notebooks are what ``notebooks/build.py``
writes, that each stays under 5 MB, and that no compared output holds a path, an address or
a time that would differ on another machine.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
BUILD: dict[str, Any] = runpy.run_path(str(NOTEBOOKS / "build.py"), run_name="murmur_nb_build")
NAMES = list(BUILD["NOTEBOOKS"])
VOLATILE = [
    re.compile(r"/tmp/|/root/|/home/|/work/"),  # paths of this machine
    re.compile(r"0x[0-9a-f]{8,}"),  # memory addresses
    re.compile(r"\b20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+"),  # wall-clock timestamps
]


def _saved(name: str) -> Any:
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


def test_every_tutorial_is_there() -> None:
    assert NAMES == [
        "01-tour",
        "02-hosting-modules",
        "03-hook-components",
        "04-conversations-to-dataframes",
        "05-render-gallery",
    ]
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_saved_notebook_is_what_build_py_writes(name: str) -> None:
    built = BUILD["assemble"](name)
    saved = _saved(name)
    assert [c.cell_type for c in saved.cells] == [c.cell_type for c in built.cells]
    for i, (s, b) in enumerate(zip(saved.cells, built.cells, strict=True)):
        assert s.source == b.source, (
            f"{name} cell {i} differs from notebooks/build.py; rebuild with "
            "`.venv/bin/python notebooks/build.py`"
        )
    code = [c for c in saved.cells if c.cell_type == "code"]
    assert all(c.execution_count == i for i, c in enumerate(code, start=1)), "run top to bottom"
    nbformat.validate(saved)


@pytest.mark.parametrize("name", NAMES)
def test_saved_notebook_is_small_and_its_compared_outputs_are_portable(name: str) -> None:
    assert (NOTEBOOKS / f"{name}.ipynb").stat().st_size < 5_000_000
    saved = _saved(name)
    for i, cell in enumerate(saved.cells):
        if cell.cell_type != "code":
            continue
        lines = cell.source.splitlines()
        if lines and lines[0] == "# NBVAL_IGNORE_OUTPUT":
            assert lines[1].startswith("# (not compared: "), f"{name} cell {i}: say why"
            continue
        for output in cell.outputs:
            assert output.output_type != "error", f"{name} cell {i} raised"
            assert output.get("name") != "stderr", f"{name} cell {i} wrote to stderr"
            text = output.get("text", "") + output.get("data", {}).get("text/plain", "")
            for pattern in VOLATILE:
                assert not pattern.search(text), f"{name} cell {i}: {pattern.pattern} in {text!r}"
