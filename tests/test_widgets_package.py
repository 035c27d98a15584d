"""The widgets subpackage: its public names, and ipywidgets staying inside it."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_a_widget_given_the_wrong_kind_of_thing_says_what_it_takes(tmp_path: Path) -> None:
    """A path for a host, a list for a batch, a dict for an invocation: each raised an
    AttributeError from deep inside ('str' object has no attribute 'modules')."""
    cases = [
        (widgets.ModuleBrowser, str(tmp_path), "ModuleBrowser takes a ModuleHost"),
        (widgets.BatchView, [{"n": 1}], "BatchView takes the Batch that host.map(...) returns"),
        (widgets.InvocationView, {"ok": True}, "InvocationView takes the Invocation that "),
        (widgets.HookConsole, {"summarize": "x.wasm"}, "HookConsole takes a HookHost"),
        (widgets.ConversationExplorer, ["ctx"], "ConversationExplorer takes a Conversation"),
    ]
    for widget, given, said in cases:
        args = (given, "ctx") if widget is widgets.ConversationExplorer else (given,)
        with pytest.raises(TypeError, match=re.escape(said)):
            widget(*args)
