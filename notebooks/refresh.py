"""Re-run the tutorials in place and normalize what they save, so nbval can compare them.

The ``.ipynb`` files in this folder are the tutorials' source: edit them in Jupyter, then run::

    bash scripts/refresh-notebooks              # every notebook
    bash scripts/refresh-notebooks 03 05        # only those whose name starts so

Each notebook is executed top to bottom with nbclient in a fresh ``python3`` kernel, on a fresh
demo home (``MURMUR_NB_DEMO_HOME`` points at a temporary folder unless ``--home`` names one), so
a refresh never touches the reader's own demo home and proves the notebooks need nothing
prepared. Then :func:`normalize` drops what changes on every run or every machine without
meaning anything:

* notebook metadata: kernel ``python3``, ``language_info`` reduced to the language name, no
  saved widget state (the kernel's widgets are gone once it stops);
* cells: no execution timings; ids are kept (a missing or repeated id gets a new one);
* outputs: widget model ids derived from the cell id and the output's place; paths of this
  machine (the demo home, this checkout, the Python environment, the temporary folder, the
  user's home), memory addresses and wall-clock timestamps replaced by placeholders.

Outputs nbval compares must not need that last scrub: they would differ on the next machine.
When one does, the notebook is still saved (scrubbed), the cell is named and the exit status
is 1: print something portable there, or start the cell with ``# NBVAL_IGNORE_OUTPUT`` and
``# (not compared: <why>)``. Outputs of such cells (timings, plots) may change on every refresh.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
IGNORE = "# NBVAL_IGNORE_OUTPUT"
WHY = "# (not compared: "
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
WIDGET = "application/vnd.jupyter.widget-view+json"
TIMINGS = ("execution", "ExecuteTime")  # nbclient's and jupyterlab-execute-time's
TEXTUAL = ("text/plain", "text/html", "text/markdown", "text/latex", "image/svg+xml")
# Placeholders for what differs between runs on any machine.
VOLATILE = [
    (re.compile(r"\b0x[0-9a-fA-F]{8,}\b"), "0x…"),  # memory addresses
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+(Z|[+-]\d\d:?\d\d)?"), "<time>"),
]

#: Where a path's match must end, when not at any word's end: the temporary folder only as a
#: folder of this run's paths, since ``/tmp`` alone is also the sandbox's own ``/tmp`` (its
#: report's "[limits] each tmpfs (/, /tmp, the working folder)") on every machine.
_END = {"$TMPDIR": r"(?=/)"}

Scrub = list[tuple[re.Pattern[str], str]]


def notebooks(only: list[str] | None = None) -> list[Path]:
    """The tutorials, by name; ``only`` keeps those whose name starts with one of its items."""
    found = sorted(HERE.glob("*.ipynb"))
    return [p for p in found if not only or any(p.name.startswith(o) for o in only)]


def scrubber(demo_home: str | os.PathLike[str] | None = None) -> Scrub:
    """Patterns for the machine paths of this run (longest first), then :data:`VOLATILE`."""
    places = {
        str(Path(tempfile.gettempdir()).resolve()): "$TMPDIR",
        str(Path.home()): "~",
        sys.prefix: "<python>",
        str(HERE.parent): "<checkout>",
    }
    if demo_home is not None:
        places[str(Path(demo_home).resolve())] = "$MURMUR_NB_DEMO_HOME"
    literal = [
        (re.compile(re.escape(path) + _END.get(placeholder, r"(?![\w.-])")), placeholder)
        for path, placeholder in sorted(places.items(), key=lambda kv: -len(kv[0]))
        if len(path) > 1
    ]
    return literal + VOLATILE



def is_compared(cell: Any) -> bool:
    """Whether nbval compares this code cell's outputs (no ignore or skip marker or tag)."""
    markers = {line.strip() for line in cell.source.splitlines()}
    tags = set(cell.metadata.get("tags", []))
    skipped = {IGNORE, "# NBVAL_SKIP"} & markers or {"nbval-ignore-output", "nbval-skip"} & tags
    return not skipped


def scrub_text(text: str, scrub: Scrub) -> str:
    for pattern, placeholder in scrub:
        text = pattern.sub(placeholder, text)
    return text


def normalize_output(output: Any, where: str, scrub: Scrub) -> bool:
    """Normalize one output in place; return whether a machine fact had to be scrubbed."""
    changed = False
    if "text" in output:
        text = scrub_text(output.text, scrub)
        changed |= text != output.text
        output.text = text
    data = output.get("data", {})
    for mime in TEXTUAL:
        if isinstance(data.get(mime), str):
            text = scrub_text(data[mime], scrub)
            changed |= text != data[mime]
            data[mime] = text
    if isinstance(data.get(WIDGET), dict):
        data[WIDGET]["model_id"] = hashlib.sha256(where.encode()).hexdigest()[:32]
    return changed


def give_ids(nb: Any) -> None:
    """Keep every cell id; give one to a cell that has none or repeats an earlier one."""
    nb.nbformat_minor = max(nb.nbformat_minor, 5)
    taken = {cell.get("id") for cell in nb.cells}
    seen: set[str] = set()
    for i, cell in enumerate(nb.cells):
        if not cell.get("id") or cell.id in seen:
            new = f"{i:04d}"
            while new in taken:
                new = hashlib.sha256(new.encode()).hexdigest()[:8]
            cell.id = new
            taken.add(new)
        seen.add(cell.id)


def normalize(nb: Any, scrub: Scrub) -> list[str]:
    """Normalize an executed notebook in place (see the module docstring).

    Returns one line per compared cell whose outputs held a machine fact (now scrubbed).
    """
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = nbformat.from_dict(KERNELSPEC)
    nb.metadata["language_info"] = nbformat.from_dict({"name": "python"})
    give_ids(nb)
    problems = []
    for cell in nb.cells:
        for key in TIMINGS:
            cell.metadata.pop(key, None)
        if cell.cell_type != "code":
            continue
        scrubbed = [
            normalize_output(output, f"{cell.id}/{i}", scrub)
            for i, output in enumerate(cell.outputs)
        ]
        if any(scrubbed) and is_compared(cell):
            problems.append(
                f"cell {cell.id} printed a path, an address or a time that nbval compares; "
                f"print something portable or mark the cell {IGNORE} with {WHY}<why>)"
            )
    return problems


def refresh(path: Path, scrub: Scrub) -> list[str]:
    """Execute one notebook top to bottom, normalize it and save it where it was."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,
        record_timing=False,
    )
    client.execute()
    problems = normalize(nb, scrub)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return [f"{path.name}: {problem}" for problem in problems]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="refresh only notebooks whose name starts so")
    parser.add_argument("--home", help="demo home to run on (default: a fresh temporary folder)")
    args = parser.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory(prefix="murmur-nb-refresh-") as tmp:
        home = Path(args.home or Path(tmp) / "demo").resolve()
        os.environ["MURMUR_NB_DEMO_HOME"] = str(home)
        scrub = scrubber(home)
        for path in notebooks(args.only):
            t0 = time.perf_counter()
            try:
                problems = refresh(path, scrub)
            except Exception as exc:  # a failing cell: report it, go on with the others
                print(f"{path.name}: not saved, it failed to run:\n{exc}", file=sys.stderr)
                failed = True
                continue
            size = path.stat().st_size
            print(f"{path.name}: {size / 1e6:.2f} MB in {time.perf_counter() - t0:.0f} s")
            if size >= 5_000_000:
                problems.append(f"{path.name}: {size} bytes; a tutorial must stay under 5 MB")
            for problem in problems:
                print(problem, file=sys.stderr)
            failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
