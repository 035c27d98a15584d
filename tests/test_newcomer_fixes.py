"""What a newcomer's trial found in the words murmur-nb says about itself.

* ``help(host.invoke)`` said ``LiveRun.in_cell`` needs ``murmur-nb[widgets]``, an extra that
  does not exist (ipywidgets is a core dependency);
* install advice said only ``pip install 'murmur-nb[render]'``, while murmur-nb is usually
  installed from its checkout, where that fetches another copy: it says both forms now;
* docs/benchmarks.md listed every benchmark script but ``bench_widgets.py``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import murmur_nb as mnb

REPO = Path(__file__).resolve().parent.parent
EXTRA = re.compile(r"murmur-nb\[([A-Za-z0-9_,<> -]+)\]")


def texts() -> dict[Path, str]:
    """Every text murmur-nb shows a user: its Python sources, the README and docs/."""
    paths = [*sorted((REPO / "murmur_nb").rglob("*.py")), REPO / "README.md",
             *sorted((REPO / "docs").glob("*.md"))]  # fmt: skip
    return {path: path.read_text(encoding="utf-8") for path in paths}


def test_every_extra_a_text_names_exists() -> None:
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"])  # fmt: skip
    named = {
        (path.relative_to(REPO).as_posix(), extra.strip())
        for path, text in texts().items()
        for match in EXTRA.finditer(text)
        for extra in match.group(1).split(",")
        if extra.strip() not in ("{extra}", "<extra>")
    }
    assert {(path, extra) for path, extra in named if extra not in extras} == set()
    assert "widgets]" not in (mnb.ModuleHost.invoke.__doc__ or "")


def test_install_advice_names_the_checkout_form_too() -> None:
    """Outside murmur_nb/_render (whose messages are tested with its cards), each file that
    says ``pip install 'murmur-nb[X]'`` also says ``pip install -e '.[X]'``."""
    missing = []
    for path, text in texts().items():
        if "_render" in path.parts:
            continue
        for extra in re.findall(r"pip install 'murmur-nb\[(\w+|\{extra\}|<extra>)\]'", text):
            if f"pip install -e '.[{extra}]'" not in text:
                missing.append((path.relative_to(REPO).as_posix(), extra))
    assert missing == []


def test_a_missing_dependency_says_how_to_install_from_a_checkout() -> None:
    error = mnb.MissingDependency("pyarrow", "render", "Writing Parquet")
    assert error.code == "missing_dependency" and error.extra == "render"
    assert "pip install 'murmur-nb[render]'" in str(error)
    assert "pip install -e '.[render]'" in str(error)


def test_the_benchmarks_page_lists_every_benchmark_script() -> None:
    page = (REPO / "docs" / "benchmarks.md").read_text()
    listing = page.split("\n## ", 1)[0]  # the opening paragraph names them all
    scripts = sorted(p.name for p in (REPO / "benchmarks").glob("bench_*.py"))
    assert "bench_widgets.py" in scripts
    assert [name for name in scripts if f"`{name}`" not in listing and
            f"benchmarks/{name}`" not in listing] == []  # fmt: skip
