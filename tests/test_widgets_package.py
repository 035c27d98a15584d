"""The widgets subpackage: its public names, and ipywidgets staying inside it."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

from murmur_nb import widgets

PACKAGE = Path(widgets.__file__).resolve().parent.parent


def test_all_is_sorted_and_names_every_public_widget() -> None:
    assert widgets.__all__ == sorted(widgets.__all__)
    public = {n for n, v in vars(widgets).items() if not n.startswith("_") and inspect.isclass(v)}
    assert (
        public
        == set(widgets.__all__)
        == {
            "BatchView",
            "CapabilityForm",
            "CompactionViewer",
            "ConversationExplorer",
            "HookConsole",
            "InvocationView",
            "LiveRun",
            "ModuleBrowser",
        }
    )


def test_only_the_widgets_subpackage_imports_ipywidgets() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if "widgets" in path.relative_to(PACKAGE).parts[:1]:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "ipywidgets" or n.startswith("ipywidgets.") for n in names):
                offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []


def test_widgets_load_lazily_from_the_package() -> None:
    code = (
        "import sys, murmur_nb as mnb; "
        "before = 'ipywidgets' in sys.modules; "
        "cls = mnb.widgets.ModuleBrowser; "
        "print(before, 'ipywidgets' in sys.modules, cls.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "ModuleBrowser"]
