"""Copy as code: the call a widget writes runs, and sends what the widget's run sent.

The generated code is executed for real (``exec`` with the host bound to the name the code
uses) against real modules: the demo's ``gallery.thumbs`` for the widgets, and the ``good``
fixture's ``echo`` (it returns the request it got) for inputs that are awkward to write as
Python: nested, non-ASCII, quotes, newlines, tuples, large numbers, ``null``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur_nb import DemoHome, ModuleHost
from murmur_nb._forms.as_code import (  # private: the one function every widget's code uses
    invoke_code,
    map_code,
    python_literal,
)
from murmur_nb.widgets import CapabilityForm, ModuleBrowser
from murmur_nb.widgets._code_box import insert_next_cell  # private: no kernel, no cell

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_a_literal_evaluates_back_to_the_json_value(value: Any) -> None:
    text = python_literal(value)
    assert eval(text, {"__builtins__": {}}) == value
    call = invoke_code("good.echo", value)
    assert compile(call, "<copied>", "eval")


def test_a_literal_is_the_json_the_module_receives() -> None:
    """Tuples become lists and keys strings, as ``json.dumps`` sends them; a value the host
    would not send (NaN, an object) has no code either."""
    assert eval(python_literal({"a": (1, 2), 3: None})) == {"a": [1, 2], "3": None}
    with pytest.raises(ValueError, match="JSON compliant"):
        python_literal({"x": math.nan})
    with pytest.raises(TypeError, match="not JSON serializable"):
        python_literal({"x": object()})
    with pytest.raises(ValueError, match="not a Python identifier"):
        invoke_code("good.echo", {}, host="my host")


def test_long_calls_are_wrapped_and_short_ones_are_one_line() -> None:
    assert invoke_code("a.b", {"count": 2}) == "host.invoke('a.b', {'count': 2})"
    code = map_code("a.b", [{"n": i, "text": "x" * 30} for i in range(4)], host="h",
                    options={"concurrency": 2})  # fmt: skip
    assert code.startswith("h.map(\n    'a.b',\n    [{") and code.endswith("    concurrency=2,\n)")
    assert all(len(line) <= 88 for line in code.splitlines())


@pytest.fixture
def good_host(facet_home: Path) -> Iterator[ModuleHost]:
    with ModuleHost(home=facet_home) as host:
        yield host


AWKWARD = {
    "count": 3,
    "title": "Ünïcode \"quotes\" 'single' \\ back\nnew line\t☃",
    "nested": {"list": [1, 2.5, -0.0, 10**30, None, True, False], "empty": {}, "e": []},
    "pair": (1, "two"),
}


def test_the_code_runs_and_sends_the_same_input(good_host: ModuleHost) -> None:
    sent = json.loads(json.dumps(AWKWARD))
    direct = good_host.invoke("good.echo", AWKWARD)
    code = invoke_code("good.echo", AWKWARD, host="mh")
    scope: dict[str, Any] = {"mh": good_host}
    again = eval(code, scope)
    assert direct.ok and again.ok
    assert again.result["request"]["input"] == direct.result["request"]["input"] == sent
    batch = eval(map_code("good.echo", [AWKWARD, {"count": 0}], host="mh"), scope)
    assert [inv.result["request"]["input"] for inv in batch] == [sent, {"count": 0}]


@pytest.fixture
def host(demo_home: DemoHome) -> Iterator[ModuleHost]:
    with ModuleHost(home=demo_home.facet_home, policy=demo_home.policy(),
                    artifact_store=demo_home.artifact_store) as h:  # fmt: skip
        yield h


def _run(code: str, host: ModuleHost) -> Any:
    scope: dict[str, Any] = {"host": host}
    exec(f"inv = {code}", scope)
    return scope["inv"]


def test_the_forms_code_makes_the_run_the_form_made(host: ModuleHost) -> None:
    form = CapabilityForm(host, "gallery.thumbs")
    form.set_value("count", "2")
    form.set_value("palette", "mono")
    assert form.code_box.layout.display == "none"
    form.code_button.click()
    code = form.code_box.code
    assert code == form.code() == form.code_box.area.value
    assert code == (
        "host.invoke('gallery.thumbs', {'count': 2, 'size': 160, 'seed': 7, 'palette': 'mono'})"
    )
    assert form.code_box.layout.display is None
    form.code_box.area.value = "host.invoke('something.else')"  # a person types into it
    assert form.code_box.area.value == code  # read-only: it stays the code
    form.run_button.click()
    form.wait()
    ran = form.invocation
    again = _run(code, host)
    assert ran is not None and ran.ok and again.ok
    assert again.request.input == ran.request.input
    assert again.result == ran.result
    assert [a.digest for a in again.artifacts] == [a.digest for a in ran.artifacts]


def test_a_history_rows_code_makes_that_run_again(host: ModuleHost) -> None:
    browser = ModuleBrowser(host, host_name="studio")
    form = browser.open_form("gallery.thumbs")
    form.set_value("count", "1")
    form.run_button.click()
    form.wait()
    form.set_value("count", "3")
    form.set_value("seed", "11")
    form.run_button.click()
    form.wait()
    first, second = browser.history
    rows = browser.history_box.children[1:]  # newest first
    buttons = [c for row in rows for c in row.children if "murmur-history-code" in c._dom_classes]
    assert len(buttons) == 2
    buttons[1].click()  # the older run's row
    code = browser.code_box.code
    assert code == first.code("studio") == browser.code_box.area.value
    assert code.startswith("studio.invoke('gallery.thumbs', {'count': 1,")
    assert f"the {first.time:%H:%M:%S} run of gallery.thumbs" in browser.code_box.caption.value
    scope: dict[str, Any] = {"studio": host}
    again = eval(code, scope)
    assert again.request.input == first.invocation.request.input
    assert again.result == first.invocation.result
    buttons[0].click()
    assert browser.code_box.code == second.code("studio")
    assert _run(second.code(), host).request.input == second.invocation.request.input
    assert browser.copy_as_code() == browser.code_box.code  # the last run by default


def test_no_cell_is_written_outside_a_kernel() -> None:
    assert insert_next_cell("host.invoke('a.b', {})") is False
