"""The saved tutorials: plain notebooks, run top to bottom, small, and free of machine facts.

The ``.ipynb`` files are the tutorials' source, edited in Jupyter and refreshed with
``scripts/refresh-notebooks``. nbval (``--nbval`` in ``addopts``) re-runs every notebook and
compares its outputs; these fast checks cover what nbval cannot see: that each file is a valid
notebook for the ``python3`` kernel, saved as the refresh writes it (run top to bottom, no
widget state, no timings), under 5 MB, that no compared output holds a path, an address or a
time that would differ on another machine, that every output nbval skips says why, and that
the programs a tutorial runs are files beside it, not strings inside a cell.
"""

from __future__ import annotations

import ast
import copy
import re
import runpy
import tempfile
from pathlib import Path
from typing import Any

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = [
    "01-tour",
    "02-hosting-modules",
    "03-hook-components",
    "04-conversations-to-dataframes",
    "05-render-gallery",
    "06-checking-a-module",
    "07-running-over-a-dataset",
]
VOLATILE = [
    re.compile(r"/tmp/|/root/|/home/|/work/|/Users/"),  # paths of a machine
    re.compile(r"0x[0-9a-f]{8,}"),  # memory addresses
    re.compile(r"\b20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+"),  # wall-clock timestamps
]
NOT_COMPARED_MARKERS = {"# NBVAL_IGNORE_OUTPUT", "# NBVAL_SKIP"}
NOT_COMPARED_TAGS = {"nbval-ignore-output", "nbval-skip"}


def _saved(name: str) -> Any:
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


def _code_cells(name: str) -> list[Any]:
    return [cell for cell in _saved(name).cells if cell.cell_type == "code"]


def _not_compared(cell: Any) -> bool:
    lines = {line.strip() for line in cell.source.splitlines()}
    tags = set(cell.metadata.get("tags", []))
    return bool(lines & NOT_COMPARED_MARKERS or tags & NOT_COMPARED_TAGS)


def test_every_tutorial_is_there() -> None:
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_saved_notebook_is_a_plain_python3_notebook_run_top_to_bottom(name: str) -> None:
    saved = _saved(name)
    nbformat.validate(saved)
    assert saved.metadata.kernelspec.name == "python3"
    assert saved.metadata.kernelspec.language == "python"
    counts = [cell.execution_count for cell in _code_cells(name)]
    assert counts == list(range(1, len(counts) + 1)), "run top to bottom, every cell once"
    ids = [cell.id for cell in saved.cells]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("name", NAMES)
def test_saved_notebook_is_what_the_refresh_step_writes(name: str) -> None:
    """The refresh's normalization leaves a saved notebook unchanged.

    It uses notebooks/refresh.py's own ``normalize`` on purpose: a notebook saved from Jupyter
    without a refresh (widget state, timings, random widget ids) fails here with the fix named.
    """
    refresh = runpy.run_path(str(NOTEBOOKS / "refresh.py"), run_name="murmur_nb_refresh")
    saved = _saved(name)
    normalized = copy.deepcopy(saved)
    problems = refresh["normalize"](normalized, refresh["scrubber"]())
    assert problems == []
    assert nbformat.writes(normalized) == nbformat.writes(saved), (
        f"{name} was saved without a refresh; run `bash scripts/refresh-notebooks {name[:2]}`"
    )
    assert "widgets" not in saved.metadata
    assert all("execution" not in cell.metadata for cell in saved.cells)


@pytest.mark.parametrize("name", NAMES)
def test_saved_notebook_is_small_and_its_compared_outputs_are_portable(name: str) -> None:
    assert (NOTEBOOKS / f"{name}.ipynb").stat().st_size < 5_000_000
    for cell in _code_cells(name):
        if _not_compared(cell):
            lines = cell.source.splitlines()
            marker = next((i for i, s in enumerate(lines) if s in NOT_COMPARED_MARKERS), -1)
            why = lines[marker + 1] if marker + 1 < len(lines) else ""
            assert why.startswith("# (not compared: "), f"{name} cell {cell.id}: say why"
            continue
        for output in cell.outputs:
            assert output.output_type != "error", f"{name} cell {cell.id} raised"
            assert output.get("name") != "stderr", f"{name} cell {cell.id} wrote to stderr"
            text = output.get("text", "") + output.get("data", {}).get("text/plain", "")
            text += output.get("data", {}).get("text/html", "")
            for pattern in VOLATILE:
                found = pattern.search(text)
                assert not found, f"{name} cell {cell.id}: {pattern.pattern} in {text!r}"


def _string_constants(source: str) -> list[str]:
    tree = ast.parse(TransformerManager().transform_cell(source))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def _is_python_program(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Import | ast.ImportFrom) for node in tree.body)


@pytest.mark.parametrize("name", NAMES)
def test_programs_a_tutorial_runs_are_files_not_strings_in_cells(name: str) -> None:
    for cell in _code_cells(name):
        for text in _string_constants(cell.source):
            assert not _is_python_program(text), (
                f"{name} cell {cell.id} holds a Python program in a string; put it in a file "
                "under notebooks/ and have the cell copy it"
            )
    for program in ("rogue_module.py", "census_hook.py"):
        assert _is_python_program((NOTEBOOKS / program).read_text())


def test_refresh_normalization_scrubs_machine_facts_and_names_compared_cells(
    tmp_path: Path,
) -> None:
    """notebooks/refresh.py's ``normalize`` on a hand-made executed notebook (an internal on
    purpose: the refresh step is a script, and this is its contract with nbval)."""
    refresh = runpy.run_path(str(NOTEBOOKS / "refresh.py"), run_name="murmur_nb_refresh")
    home = tmp_path / "demo"
    leak = f"{home}/facet-studio at 0x7f3a2b1c0d9e, 2026-11-30T10:00:00.123456+00:00\n"
    compared = nbformat.v4.new_code_cell("print(home)", id="keep-me")
    compared.outputs = [nbformat.v4.new_output("stream", name="stdout", text=leak)]
    compared.metadata["execution"] = {"iopub.status.busy": "2026-11-30T10:00:00.1Z"}
    ignored = nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT\n# (not compared: why)\nw")
    widget = {"model_id": "f" * 32, "version_major": 2, "version_minor": 0}
    ignored.outputs = [
        nbformat.v4.new_output(
            "execute_result",
            data={"text/plain": leak, "application/vnd.jupyter.widget-view+json": widget},
            execution_count=2,
        )
    ]
    nb = nbformat.v4.new_notebook(cells=[compared, ignored])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.9"}
    twin = copy.deepcopy(nb)

    problems = refresh["normalize"](nb, refresh["scrubber"](home))

    assert len(problems) == 1 and "keep-me" in problems[0]
    expected = "$MURMUR_NB_DEMO_HOME/facet-studio at 0x…, <time>\n"
    assert compared.outputs[0].text == expected
    assert ignored.outputs[0].data["text/plain"] == expected
    assert compared.id == "keep-me" and "execution" not in compared.metadata
    assert "widgets" not in nb.metadata
    assert nb.metadata.language_info == {"name": "python"}
    assert nb.metadata.kernelspec.name == "python3"
    model_id = ignored.outputs[0].data["application/vnd.jupyter.widget-view+json"]["model_id"]
    assert model_id != "f" * 32
    refresh["normalize"](twin, refresh["scrubber"](home))
    assert nbformat.writes(twin) == nbformat.writes(nb)  # the same input, the same bytes
    nbformat.validate(nb)


def test_refresh_scrubs_the_temporary_folder_only_as_a_folder_of_paths(tmp_path: Path) -> None:
    """The sandbox report's "[limits] each tmpfs (/, /tmp, the working folder)" names the
    sandbox's own ``/tmp``: the refresh made it "$TMPDIR" (and refused the tour), so nbval
    compared "$TMPDIR" with "/tmp"."""
    refresh = runpy.run_path(str(NOTEBOOKS / "refresh.py"), run_name="murmur_nb_refresh")
    scrub = refresh["scrubber"](tmp_path / "demo")
    temp = str(Path(tempfile.gettempdir()).resolve())
    said = f"each tmpfs (/, {temp}, the working folder); kept in {temp}/run-1/out"
    assert refresh["scrub_text"](said, scrub) == (
        f"each tmpfs (/, {temp}, the working folder); kept in $TMPDIR/run-1/out"
    )
