"""CapabilityForm's inputs driven as a person would, for the form defects users reported.

A form with no input, a file that is gone when it is chosen, a file given as text, controls a
screen reader cannot name, an upload whose name is not ASCII, a number too long to quote:
each runs the demo modules (and one ``plain`` module written here as a real executable)
through a real :class:`ModuleHost` on a demo home in a temporary folder.
"""

from __future__ import annotations

import html
import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ipywidgets as w
import pytest
from _users import run_as_test_user

from murmur_nb import DemoHome, ModuleHost
from murmur_nb.widgets import CapabilityForm

EVERY_KIND: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 2, "description": "Who asks."},
        "ratio": {"type": "number", "exclusiveMinimum": 0},
        "loud": {"type": "boolean"},
        "quiet": {"type": "boolean", "default": True},
        "rate": {"enum": [16000, 44100]},
        "spices": {"type": "array", "items": {"enum": ["salt", "pepper"]}},
        "steps": {"type": "array", "items": {"type": "integer"}},
        "extras": {"type": "object", "additionalProperties": {"type": "string"}},
        "story": {"type": "string", "maxLength": 500},
        "pan": {"type": "object", "properties": {"size": {"type": "integer", "maximum": 30}}},
    },
}

PLAIN_MAIN = """
import json, sys
def cap(name, schema):
    return {"id": "plain." + name, "title": name, "request_schema": schema,
            "result_schema": "echo", "effects": {"local": True, "cost_known": True}}
descriptor = {
    "module": "plain", "name": "Plain", "version": "1.0.0",
    "protocol_versions": ["modproto.v1"],
    "capabilities": [cap("none", "none"), cap("nothing", "nothing"), cap("free", "free"),
                     cap("every", "every")],
    "request_schemas": {
        "none": {"type": "object", "properties": {}, "additionalProperties": False},
        "nothing": {"type": "object", "properties": {}},
        "free": {"type": "object"},
        "every": json.loads(EVERY_TEXT),
    },
    "result_schemas": {"echo": {"type": "object"}}, "permissions": {},
}
def envelope(operation, request_id, result):
    return {"protocol": "modproto.v1", "module": "plain", "operation": operation,
            "request_id": request_id, "ok": True, "result": result, "warnings": [],
            "execution": {"local": True, "estimated_cost": 0, "actual_cost": 0}}
if sys.argv[1:] == ["describe"]:
    print(json.dumps(envelope("describe", "", descriptor)))
else:
    request = json.load(sys.stdin)
    print(json.dumps(envelope("invoke", request["request_id"], request["input"])))
""".replace("EVERY_TEXT", repr(json.dumps(EVERY_KIND)))


@pytest.fixture(scope="module")
def demo_home(demo_home: DemoHome) -> DemoHome:
    """The shared demo home (conftest) plus this file's ``plain`` module."""
    folder = demo_home.facet_home / "modules" / "plain"
    folder.mkdir()
    (folder / "main.py").write_text(PLAIN_MAIN)
    launcher = folder / "module"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I "${{0%/*}}/main.py" "$@"\n')
    launcher.chmod(0o755)
    return demo_home


@pytest.fixture
def host(demo_home: DemoHome) -> Iterator[ModuleHost]:
    with ModuleHost(
        home=demo_home.facet_home,
        policy=demo_home.policy(),
        artifact_store=demo_home.artifact_store,
    ) as h:
        yield h


def _html_in(widget: Any) -> Iterator[str]:
    """The HTML of every ``HTML`` widget in ``widget``'s tree."""
    if isinstance(widget, w.HTML):
        yield widget.value
    for child in getattr(widget, "children", ()):
        yield from _html_in(child)


def _png(tmp_path: Path, name: str = "red.png") -> bytes:
    from PIL import Image

    Image.new("RGB", (64, 48), (200, 30, 30)).save(tmp_path / name)
    return (tmp_path / name).read_bytes()


# --- a capability that takes no input -------------------------------------------------


@pytest.mark.parametrize("capability", ["plain.none", "plain.nothing", "plain.free"])
def test_a_capability_without_input_runs_from_its_untouched_form(
    host: ModuleHost, capability: str
) -> None:
    form = CapabilityForm(host, capability)
    assert form.visible_errors() == {} and form.form.value() == {}
    assert "✗" not in form.text()
    form.run_button.click()
    form.wait()
    assert form.state == "ran", form.text()
    assert form.invocation.request.input == {} and form.invocation.result == {}


def test_a_capability_that_admits_no_property_shows_no_field(host: ModuleHost) -> None:
    form = CapabilityForm(host, "plain.none")
    assert form.inputs == {} and form.form.fields == []
    assert "(json)" not in form.text() and "✗" not in form.text()


# --- a chosen file that is gone -------------------------------------------------------


def test_a_chosen_file_that_is_gone_is_refused_beside_the_field(host: ModuleHost) -> None:
    thumbs = host.invoke("gallery.thumbs", {"count": 2, "seed": 9001})  # never staged before
    form = CapabilityForm(host, "critic.review", artifacts=list(thumbs.artifacts))
    picker = form.files["image"]
    Path(thumbs.artifacts[0].file).unlink()
    picker.choice.value = 0  # the person picks the thumbnail whose file is gone
    shown = html.unescape(picker.error_view.value)
    assert "✗ the file of 'Thumb 1 of 2" in shown and "is gone" in shown
    assert "run that capability again, or upload the file" in shown
    # nothing is chosen: the dropdown, the picker and the form's value agree
    assert picker.choice.value == -1 and picker.choice.label == "— choose a file —"
    assert picker.staged is None and picker.ref() is None and picker.preview.value == ""
    assert "path" not in form.form.value()["image"]
    form.run_button.click()
    form.wait()
    assert form.state == "invalid" and form.invocation is None
    assert "is gone" in picker.error_view.value  # still says why, not just "choose a file"
    text = form.text()  # its text says so too
    assert "image * (file) =   ✗ the file of 'T" in text and "is gone" in text
    picker.choice.value = 1  # the other one is still there
    assert picker.error == "" and picker.error_view.value == ""
    assert picker.staged is not None and form.form.value() == {"image": picker.staged.ref()}
    form.run_button.click()
    form.wait()
    assert form.state == "ran" and form.invocation.ok, form.text()


def test_a_gone_file_with_a_staged_copy_is_shown_from_the_copy(host: ModuleHost) -> None:
    """The host stages by content: the copy it holds is what the module reads anyway."""
    thumbs = host.invoke("gallery.thumbs", {"count": 1, "seed": 9002})
    staged = host.stage(thumbs.artifacts[0])
    Path(thumbs.artifacts[0].file).unlink()
    form = CapabilityForm(host, "critic.review", artifacts=list(thumbs.artifacts))
    picker = form.files["image"]
    picker.choice.value = 0
    assert picker.error == "" and picker.staged == staged
    assert "data:image/png;base64," in picker.preview.value
    form.run_button.click()
    form.wait()
    assert form.state == "ran" and form.invocation.ok, form.text()


@pytest.mark.skipif(os.geteuid() != 0, reason="another account against a root kernel")
def test_a_root_kernels_refused_store_is_said_beside_the_field(
    demo_home: DemoHome, open_folder: Path, only_root: Path, reachable: Path, tmp_path: Path
) -> None:
    """A root kernel's ``artifact_store=`` behind a link another account planted is refused
    with a ``ValueError`` on first use: choosing or uploading a file ended in a traceback
    out of the widget. Now the refusal is said beside the field, as a gone file's is, and
    nothing is chosen or made where the link leads."""
    store = open_folder / "store"
    planted = run_as_test_user(["ln", "-s", str(only_root), str(store)], reachable / "scratch")
    assert planted.returncode == 0 and store.readlink() == only_root, planted.stderr
    with ModuleHost(home=demo_home.facet_home, policy=demo_home.policy(),
                    artifact_store=store) as host:  # fmt: skip
        thumbs = host.invoke("gallery.thumbs", {"count": 1, "seed": 9003})
        form = CapabilityForm(host, "critic.review", artifacts=list(thumbs.artifacts))
        picker = form.files["image"]
        picker.choice.value = 0  # the person picks the thumbnail: staging it is refused
        shown = html.unescape(picker.error_view.value)
        assert "✗ 'Thumb 1 of 1 (dusk, seed 9003)' cannot be staged: the artifact store" in shown
        assert "cannot be used by a root process" in shown and "artifact_store=" in shown
        assert picker.choice.value == -1 and picker.staged is None and picker.ref() is None
        content = _png(tmp_path)
        picker.upload.value = (
            {"name": "mine.png", "type": "image/png", "size": len(content),
             "content": memoryview(content), "last_modified": datetime.fromtimestamp(0, UTC)},
        )  # fmt: skip
        shown = html.unescape(picker.error_view.value)
        assert "✗ 'mine.png' cannot be staged: the artifact store" in shown, shown
        assert picker.choice.value == -1 and picker.staged is None
        assert len(picker.choice.options) == 2  # none, and the thumbnail: no upload offered
    assert list(only_root.iterdir()) == [] and store.readlink() == only_root


# --- a file given as text -------------------------------------------------------------


def test_a_file_given_as_a_name_says_what_a_reference_is(host: ModuleHost) -> None:
    with pytest.raises(TypeError) as err:
        CapabilityForm(host, "critic.review", values={"image": "thumb.png"})
    message = str(err.value)
    assert "'thumb.png'" in message and "staged.ref()" in message
    assert "{'root': 'staged', 'path': 'sha256/<hex>.png'}" in message
    with pytest.raises(ValueError, match="exactly two non-empty strings, root and path"):
        CapabilityForm(host, "critic.review", values={"image": {"root": "staged"}})


# --- every control has a name ---------------------------------------------------------


def test_every_control_is_named_for_a_screen_reader_and_labelled_once(host: ModuleHost) -> None:
    form = CapabilityForm(host, "plain.every")
    assert len(form.inputs) == 10
    for key, control in form.inputs.items():
        title = key.rpartition(".")[2]
        assert control.description == "", key  # a description would be a second label
        assert control.tooltip.startswith(title), (key, control.tooltip)
        labels = [page for page in _html_in(form) if page.startswith(f"<b>{title}</b>")]
        assert len(labels) == 1, key  # the one visible label, as before
    assert form.inputs["name"].tooltip == "name (required): Who asks. — at least 2 characters"
    assert form.inputs["pan.size"].tooltip == "size: ≤ 30"
    assert form.inputs["loud"].tooltip == "loud"


def test_the_file_picker_and_the_code_box_are_named(host: ModuleHost) -> None:
    form = CapabilityForm(host, "critic.review")
    choice = form.files["image"].choice
    assert choice.description == "" and choice.tooltip
    assert "choose a file staged or produced in this session" in choice.tooltip
    area = form.code_box.area
    assert area.description == "" and area.tooltip == "generated code"
    form.copy_as_code()
    assert area.tooltip == "this critic.review input as code (read-only)"


# --- an upload's own name -------------------------------------------------------------


def test_an_upload_is_listed_under_its_own_name(host: ModuleHost, tmp_path: Path) -> None:
    content = _png(tmp_path)
    form = CapabilityForm(host, "critic.review")
    picker = form.files["image"]
    picker.upload.value = (
        {"name": "façade été.png", "type": "image/png", "size": len(content),
         "content": memoryview(content), "last_modified": datetime.fromtimestamp(0, UTC)},
    )  # fmt: skip
    assert picker.choice.label.startswith("façade été.png · image/png · ")
    assert picker.staged is not None
    assert picker.staged.artifact.path == "fa_ade__t_.png"  # stored under safe characters
    assert html.escape("façade été.png") in picker.preview.value
    form.run_button.click()
    form.wait()
    assert form.invocation is not None and form.invocation.ok, form.text()


# --- a number too long to quote -------------------------------------------------------


def test_a_5000_digit_number_gets_a_short_out_of_range_error(host: ModuleHost) -> None:
    form = CapabilityForm(host, "gallery.thumbs")
    form.set_value("count", "9" * 5000)
    message = form.visible_errors()["count"]
    assert message == f"'{'9' * 40}…' (5,000 characters) is too large: out of the range of numbers"
    assert any(f"✗ {message}" in html.unescape(page) for page in _html_in(form))
    form.set_value("count", "-" + "9" * 5000)
    assert "is too small: out of the range of numbers" in form.visible_errors()["count"]
    form.set_value("count", "1e400")
    assert form.visible_errors()["count"] == "'1e400' is too large: out of the range of numbers"
    form.set_value("count", "-inf")  # a word, not a numeral: no number is that large
    assert form.visible_errors()["count"] == "'-inf' is not a finite number"
