"""ModuleBrowser, CapabilityForm and InvocationView driven from Python against real modules.

Everything here runs the demo modules through a real :class:`ModuleHost` on a demo home in a
temporary folder, plus one deliberately broken module written as a real executable.
"""

from __future__ import annotations

import html
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from murmur_nb import DemoHome, ModuleHost
from murmur_nb.widgets import CapabilityForm, InvocationView, ModuleBrowser

BROKEN_MAIN = """
import json, sys
descriptor = {
    "module": "broken", "name": "Broken", "version": "0.0.1",
    "protocol_versions": ["modproto.v1"],
    "capabilities": [{"id": "review", "request_schema": "missing.request",
                      "effects": {"local": True, "cost_known": True}}],
    "request_schemas": {}, "permissions": {},
}
if sys.argv[1:] == ["describe"]:
    print(json.dumps({"protocol": "modproto.v1", "module": "broken", "operation": "describe",
                      "request_id": "", "ok": True, "result": descriptor, "warnings": [],
                      "execution": {"local": True}}))
"""


KITCHEN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["name", "ratio"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 2, "description": "Who is cooking."},
        "ratio": {"type": "number", "exclusiveMinimum": 0},
        "loud": {"type": "boolean"},
        "quiet": {"type": "boolean", "default": True},
        "rate": {"enum": [16000, 44100, None]},
        "spices": {"type": "array", "items": {"enum": ["salt", "pepper", "chili"]}},
        "steps": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
        "extras": {"type": "object", "additionalProperties": {"type": "string"}},
        "pan": {
            "type": "object",
            "properties": {"size": {"type": "integer", "minimum": 10}, "lid": {"type": "boolean"}},
        },
    },
}

KITCHEN_MAIN = """
import json, sys
schema = json.loads(SCHEMA_TEXT)
descriptor = {
    "module": "kitchen", "name": "Kitchen", "version": "2.0.0",
    "protocol_versions": ["modproto.v1"],
    "capabilities": [{"id": "kitchen.echo", "title": "Echo", "request_schema": "echo.request",
                      "result_schema": "echo.result",
                      "effects": {"local": True, "cost_known": True}}],
    "request_schemas": {"echo.request": schema},
    "result_schemas": {"echo.result": {"type": "object"}}, "permissions": {},
}
def envelope(operation, request_id, result, warnings):
    return {"protocol": "modproto.v1", "module": "kitchen", "operation": operation,
            "request_id": request_id, "ok": True, "result": result, "warnings": warnings,
            "execution": {"local": True, "estimated_cost": 0, "actual_cost": 0}}
if sys.argv[1:] == ["describe"]:
    print(json.dumps(envelope("describe", "", descriptor, [])))
else:
    request = json.load(sys.stdin)
    print(json.dumps(envelope("invoke", request["request_id"], request["input"], ["echoed"])))
""".replace("SCHEMA_TEXT", repr(json.dumps(KITCHEN_SCHEMA)))


def _install(facet_home: Path, module_id: str, main: str) -> None:
    folder = facet_home / "modules" / module_id
    folder.mkdir()
    (folder / "main.py").write_text(main)
    launcher = folder / "module"
    # main.py beside the launcher, wherever it runs from (the host runs a snapshot)
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I "${{0%/*}}/main.py" "$@"\n')
    launcher.chmod(0o755)


@pytest.fixture(scope="module")
def demo_home(demo_home: DemoHome) -> DemoHome:
    """The shared demo home (conftest) plus this file's ``broken`` and ``kitchen`` modules."""
    _install(demo_home.facet_home, "broken", BROKEN_MAIN)
    _install(demo_home.facet_home, "kitchen", KITCHEN_MAIN)
    return demo_home


@pytest.fixture
def host(demo_home: DemoHome) -> Iterator[ModuleHost]:
    with ModuleHost(
        home=demo_home.facet_home,
        policy=demo_home.policy(),
        artifact_store=demo_home.artifact_store,
    ) as h:
        yield h


def _runs(host: ModuleHost) -> int:
    return len(host.audit())


def test_module_browser_shows_versions_effects_setup_and_refusals(host: ModuleHost) -> None:
    browser = ModuleBrowser(host)
    text = browser.text()
    assert text.splitlines()[0] == "ModuleBrowser: 8 modules"
    assert "  gallery 1.0.0" in text
    assert "    gallery.thumbs [local, cost known]" in text
    assert (
        "    oracle.critique [local, provider: demo-oracle, cost unknown, needs approval]" in text
    )
    # needs setup, with the requirement's own detail (and the home path made portable)
    assert "  transcribe 0.3.0 [Needs setup]" in text
    assert "    needs binary whisper-cli: whisper-cli (from whisper.cpp) was not found" in text
    assert "$FACET_STUDIO_HOME/modules/transcribe/models/ggml-base.en.bin" in text
    assert str(host.home) not in text
    # the refused module lists with its validation errors, paths included
    assert "  broken: refused" in text
    refused = next(m for m in browser.modules if m.id == "broken")
    for error in refused.errors:
        assert f"    ✗ {error.path}: {error.detail}" in text
    assert any(e.path.startswith("capabilities[0]") for e in refused.errors)
    # the HTML (live cards and the static fallback alike) carries the same facts as badges
    cards = browser.static_html()
    assert str(host.home) not in cards
    labels = ("cost unknown", "provider: demo-oracle", "Needs setup", "refused", "v0.3.0")
    for label in (*labels, "needs approval"):
        assert label in cards
    assert "whisper-cli" in cards
    assert "<code>gallery.thumbs</code>" in cards  # every capability, as in the cards
    bundle = browser._repr_mimebundle_()
    assert bundle["text/plain"] == text and bundle["text/html"] == cards
    assert repr(browser) == text


def test_a_browser_that_finds_no_module_says_where_it_looked(tmp_path: Path) -> None:
    """A mistyped home gave "0 modules" and nothing else; now it names the folder looked in,
    whether it exists, and what to do. One module installed there, the line goes."""
    with ModuleHost(home=tmp_path / "typo") as empty:
        browser = ModuleBrowser(empty)
        summary = html.unescape(browser.summary.value)
        assert f"{tmp_path / 'typo' / 'modules'} does not exist" in summary
        assert "ModuleHost(home=...)" in summary
        assert "$FACET_STUDIO_HOME/modules does not exist" in browser.text()
        (tmp_path / "typo" / "modules").mkdir(parents=True)
        browser.refresh()
        assert "holds no module folder" in html.unescape(browser.summary.value)


def test_clicking_a_capability_in_its_card_opens_its_form(host: ModuleHost) -> None:
    browser = ModuleBrowser(host)
    assert browser.capability_picker.value == browser.capability_picker.options[0][1]
    assert not browser.open_button.disabled  # never a blank selection behind an open button
    button = browser.capability_buttons["gallery.thumbs"]
    assert button.description == "gallery.thumbs"  # the whole id, never cut
    assert button.layout.min_width == "max-content"
    button.click()
    assert isinstance(browser.form, CapabilityForm)
    assert browser.form.capability_id == "gallery.thumbs"
    assert browser.capability_picker.value == "gallery.thumbs"
    assert browser.form_box.children == (browser.form,)


def test_a_capability_that_needs_setup_shows_its_steps_before_any_form(host: ModuleHost) -> None:
    browser = ModuleBrowser(host)
    cap = next(c.id for c in host.describe("transcribe").capabilities)
    browser.capability_buttons[cap].click()
    assert browser.form is None
    (panel,) = browser.form_box.children
    steps = panel.children[0].value
    assert "Needs setup" in steps and "whisper-cli" in steps and "<ol>" in steps
    info = next(m for m in host.modules() if m.id == "transcribe")
    assert browser.setup_steps == info.setup_instructions != []
    assert str(host.home) not in steps
    anyway = panel.children[1]
    assert anyway.description == "Show the form anyway"
    assert anyway.layout.width == "auto"  # the default button width clipped the label
    anyway.click()
    assert isinstance(browser.form, CapabilityForm) and browser.form.capability_id == cap


def test_module_browser_opens_a_form_for_the_chosen_capability(host: ModuleHost) -> None:
    browser = ModuleBrowser(host)
    values = [v for _, v in browser.capability_picker.options]
    assert "gallery.thumbs" in values
    assert not any(v.startswith("broken.") or v == "review" for v in values)
    browser.capability_picker.value = "docs.report"
    browser.open_button.click()
    assert isinstance(browser.form, CapabilityForm)
    assert browser.form.capability_id == "docs.report"
    assert browser.form_box.children == (browser.form,)
    assert browser.text().endswith("  open: docs.report")


def test_form_is_generated_from_the_request_schema(host: ModuleHost) -> None:
    form = CapabilityForm(host, "gallery.thumbs")
    assert list(form.inputs) == ["count", "size", "seed", "palette"]
    assert form.inputs["count"].value == "4"
    assert form.inputs["palette"].label == "dusk"
    assert [label for label, _ in form.inputs["palette"].options][1:] == [
        "dusk",
        "ember",
        "forest",
        "mono",
    ]
    assert "How many images to paint." in form._fields["count"].box.children[1].value
    assert "≥ 1, ≤ 16" in form._fields["count"].box.children[1].value
    assert form.text().splitlines() == [
        "CapabilityForm gallery.thumbs: editing",
        "  skills: gallery.palettes (100 tokens)",
        "  count (integer) = 4",
        "  size (integer) = 160",
        "  seed (integer) = 7",
        '  palette (enum) = "dusk"',
    ]
    nested = CapabilityForm(host, "critic.review")
    assert list(nested.inputs) == ["image"]  # a file input: picked, never typed
    assert nested.inputs["image"].value == -1  # nothing chosen yet
    assert "  image * (file) = " in nested.text().splitlines()
    assert "path" not in nested.text()


def test_invalid_values_show_beside_the_field_and_nothing_runs(host: ModuleHost) -> None:
    form = CapabilityForm(host, "gallery.thumbs")
    before = _runs(host)
    form.inputs["count"].value = "99"
    assert "99 is greater than the maximum of 16" in form._fields["count"].error.value
    form.inputs["size"].value = "big"
    assert "'big' is not a number" in html.unescape(form._fields["size"].error.value)
    assert form._fields["seed"].error.value == ""
    assert form.visible_errors() == {
        "count": "99 is greater than the maximum of 16",
        "size": "'big' is not a number",
    }
    form.run_button.click()
    form.wait()
    assert form.state == "invalid"
    assert form.invocation is None
    assert "2 field(s) need attention" in form.status.value
    assert _runs(host) == before
    assert "  count (integer) = 99  ✗ 99 is greater than the maximum of 16" in form.text()
    assert "  size (integer) = big  ✗ 'big' is not a number" in form.text()


def test_required_marks_turn_into_errors_once_a_run_is_attempted(host: ModuleHost) -> None:
    form = CapabilityForm(host, "kitchen.echo")
    assert form._fields["name"].error.value == ""
    assert "*" in form._fields["name"].box.children[0].children[0].value
    form.run_button.click()
    form.wait()
    assert form.state == "invalid"
    assert "required" in form._fields["name"].error.value
    form.set_value("name", "Ada")
    assert form._fields["name"].error.value == ""
    assert form.state == "editing"
    # a file input says it in words: choose one
    files = CapabilityForm(host, "critic.review")
    assert files.files["image"].error_view.value == ""
    files.run_button.click()
    assert "choose a file or upload one" in files.files["image"].error_view.value


def test_a_valid_form_runs_and_shows_the_invocation(host: ModuleHost) -> None:
    form = CapabilityForm(host, "gallery.thumbs")
    form.set_value("count", "2")
    form.set_value("palette", "mono")
    form.run_button.click()
    form.wait()
    assert form.state == "ran"
    inv = form.invocation
    assert inv is not None and inv.ok
    assert inv.request.input == {"count": 2, "size": 160, "seed": 7, "palette": "mono"}
    view = form.result
    assert isinstance(view, InvocationView)
    assert form.result_box.children == (form.live,)
    assert form.live is not None and form.live.result_box.children == (view,)
    assert not re.search(r"\d s\b| ms\b", form.text())  # no elapsed time, no duration
    assert len(inv.artifacts) == 2
    (output,) = view.artifacts.outputs
    assert output["output_type"] == "display_data"
    assert output["data"]["text/html"].count("<img") == 2
    assert "image_grid" in output["data"]["text/plain"]
    text = form.text()
    assert "  InvocationView gallery.thumbs: ok" in text
    assert "    estimated cost: free" in text
    assert "    artifacts: 2 verified, 0 rejected" in text
    form.reset_button.click()
    assert form.result is None
    assert form.inputs["palette"].label == "dusk"
    assert form.inputs["count"].value == "4"


def _staged_thumb(host: ModuleHost) -> Any:
    inv = host.invoke("gallery.thumbs", {"count": 1})
    assert inv.ok
    return host.stage(inv.artifacts[0])


def test_approval_panel_lists_reasons_and_cancel_runs_nothing(host: ModuleHost) -> None:
    staged = _staged_thumb(host)
    form = CapabilityForm(host, "oracle.critique", values={"image": staged.ref()}, staged=[staged])
    assert form.form.value() == {"image": staged.ref()}
    before = _runs(host)
    form.run_button.click()
    form.wait()
    assert form.state == "needs_approval"
    assert form.approval_reasons == host.approval_reasons("oracle.critique")
    assert any("declares no numeric cost" in r for r in form.approval_reasons)
    assert any("paid providers: demo-oracle" in r for r in form.approval_reasons)
    panel_html = form.approval_panel.children[0].value
    for reason in form.approval_reasons:
        assert reason.split(":")[0] in panel_html
    assert form.approve_button in form.approval_panel.children[1].children
    assert form.cancel_button in form.approval_panel.children[1].children
    assert "  approval needed:" in form.text()
    form.cancel_button.click()
    assert form.state == "cancelled"
    assert form.approval_panel.children == ()
    assert form.invocation is None
    assert _runs(host) == before


def test_approve_runs_and_unknown_cost_is_never_free(host: ModuleHost) -> None:
    staged = _staged_thumb(host)
    form = CapabilityForm(host, "oracle.critique", values={"image": staged.ref()}, staged=[staged])
    form.run_button.click()
    form.wait()
    assert form.state == "needs_approval"
    form.approve_button.click()
    form.wait()
    assert form.state == "ran"
    inv = form.invocation
    assert inv is not None and inv.ok
    assert inv.execution.estimated_cost is None
    assert "estimated cost: unknown" in form.text()
    assert "actual cost: unknown" in form.text()
    assert form.result is not None
    assert "free" not in form.result.details.value
    assert "estimated cost: unknown" in form.result.details.value
    # the approval is pinned: the next run goes straight through
    form.run_button.click()
    form.wait()
    assert form.state == "ran"
    host.revoke("oracle.critique")


def test_a_changed_descriptor_brings_the_approval_panel_back(
    host: ModuleHost, demo_home: DemoHome
) -> None:
    staged = _staged_thumb(host)
    form = CapabilityForm(host, "oracle.critique", values={"image": staged.ref()}, staged=[staged])
    form.run_button.click()
    form.wait()
    form.approve_button.click()
    form.wait()
    assert form.state == "ran"
    main = demo_home.facet_home / "modules" / "oracle" / "main.py"
    original = main.read_text()
    try:
        main.write_text(original.replace('"version": "1.0.0"', '"version": "1.0.1"'))
        form.run_button.click()
        form.wait()
        assert form.state == "needs_approval"
        assert any("no longer counts" in r for r in form.approval_reasons)
    finally:
        main.write_text(original)
        host.revoke("oracle.critique")


def test_host_refusals_are_shown_with_their_code(host: ModuleHost) -> None:
    form = CapabilityForm(host, "transcribe.audio", values={"audio": {"root": "x", "path": "a"}})
    form.run_button.click()
    form.wait()
    assert form.state == "refused"
    assert form.error is not None
    assert form.error.code == "missing_requirement"
    assert "missing_requirement" in form.status.value
    assert "  refused missing_requirement:" in form.text()


def test_unknown_capabilities_say_what_exists(host: ModuleHost) -> None:
    from murmur_nb import ModuleNotFound

    with pytest.raises(ModuleNotFound, match=r"it offers: gallery\.thumbs"):
        CapabilityForm(host, "gallery.nope")
    with pytest.raises(ModuleNotFound):
        CapabilityForm(host, "nomodule.x")


def test_invocation_view_of_a_module_error(host: ModuleHost) -> None:
    inv = host.invoke("studio.storyboard_status", {"job": "0123456789abcdef"})
    assert not inv.ok
    view = InvocationView(inv)
    assert view.status == "unknown_job"
    assert "error: unknown_job" in view.header.value
    assert "storyboard job" in view.details.value
    assert view.rendering is None
    text = view.text()
    assert text.splitlines()[0] == "InvocationView studio.storyboard_status: unknown_job"
    assert "  error unknown_job: storyboard job '0123456789abcdef' is not in" in text
    assert "ms" not in text  # the duration is volatile: HTML only
    assert f"{inv.duration_ms:.0f} ms" in view.header.value


def test_invocation_view_steps_through_slides(host: ModuleHost) -> None:
    started = host.invoke("studio.storyboard", {"scenes": ["Open", "Close"], "title": "T"})
    assert started.ok
    job = started.result["job"]
    inv = host.invoke("studio.storyboard_status", {"job": job})
    while inv.ok and inv.result["state"] != "done":
        inv = host.invoke("studio.storyboard_status", {"job": job})
    assert inv.ok
    view = InvocationView(inv)
    (stepper,) = view.steppers
    assert stepper in view.children
    assert len(stepper.slides) == 3
    assert stepper.position.value == "slide 1 of 3"
    assert stepper.previous_button.disabled
    first = stepper.page.value
    stepper.next_button.click()
    assert stepper.position.value == "slide 2 of 3"
    assert stepper.page.value != first
    assert "Open" in stepper.page.value
    stepper.next_button.click()
    assert stepper.next_button.disabled
    stepper.previous_button.click()
    assert stepper.index == 1
    assert "slide 2 of 3" in stepper.text()
    kinds = " ".join(view.rendering.text.splitlines())
    assert "slides" in kinds and "timeline" in kinds


def test_text_forms_are_stable_across_runs(host: ModuleHost, demo_home: DemoHome) -> None:
    def texts() -> list[str]:
        form = CapabilityForm(host, "gallery.thumbs", values={"count": 2})
        form.run_button.click()
        form.wait()
        inv = host.invoke("studio.storyboard_status", {"job": "0123456789abcdef"})
        return [ModuleBrowser(host).text(), form.text(), InvocationView(inv).text()]

    first, second = texts(), texts()
    assert first == second
    for text in first:
        assert "0x" not in text
        assert "request_id" not in text
    assert json.dumps(first)  # plain strings


def test_a_long_running_capability_polls_by_itself_with_progress(host: ModuleHost) -> None:
    form = CapabilityForm(
        host, "studio.storyboard", values={"title": "T", "scenes": ["Open", "Mid", "Close"]}
    )
    assert form.inputs["scenes"].value == "Open\nMid\nClose"
    form.run_button.click()
    live = form.live
    assert live is not None and form.result_box.children == (live,)
    live.interval_input.value = 0.1  # the interval is an input the user can change
    form.wait()
    assert live.state == "ok" and form.state == "ran"
    job = live.invocation.result["job"]
    assert live.invocation.capability == "studio.storyboard"
    # every poll was a real call of the poll capability with the job from the first result
    polls = [i for i in host.audit().itertuples() if i.capability == "studio.storyboard_status"]
    assert live.polls == 3 and len(polls) >= 3
    assert form.invocation is live.last and live.last.request.input == {"job": job}
    assert live.last.result["state"] == "done"
    assert (live.progress.value, live.progress.max) == (3, 3)
    assert live.progress_row.layout.display is None
    assert live.progress_label.value == "3 of 3 done"
    assert form.result is live.view and len(live.view.steppers) == 1
    text = form.text()
    assert "  LiveRun studio.storyboard: ok" in text
    assert "    progress: 3 of 3 done" in text
    assert "<progress" not in live.view.details.value  # drawn once, live, by the run
    assert "<progress value=\"3\" max=\"3\">" in InvocationView(live.last).details.value
    # a capability that is not long-running is not polled
    quick = CapabilityForm(host, "docs.report")
    quick.run_button.click()
    quick.wait()
    assert quick.live is not None and quick.live.polls == 0 and quick.live.state == "ok"


def test_a_long_running_run_keeps_one_result_view_open_not_one_a_poll(host: ModuleHost) -> None:
    """Each poll's view replaces the last one in the run, which closes it with its parts:
    before, every poll left its view (its HTML, output and layouts) open in the kernel and
    the page for as long as the kernel ran, about 20 KB a poll of a job polled for hours."""
    from ipywidgets.widgets.widget import _instances  # private: the kernel's open widgets

    from murmur_nb.widgets import LiveRun

    before = set(_instances)
    live = LiveRun(host, "studio.storyboard", {"title": "T", "scenes": ["Open", "Mid", "Close"]},
                   interval=0.1)  # fmt: skip
    assert live.wait(120) and live.state == "ok" and live.polls == 3
    made = {key: widget for key, widget in _instances.items() if key not in before}
    views = [widget for widget in made.values() if isinstance(widget, InvocationView)]
    assert views == [live.view]  # the start's and the first two polls' are closed
    shown = live.view.header.model_id
    assert shown in made and live.view.layout.model_id in made


def test_every_field_kind_round_trips_through_a_real_module(host: ModuleHost) -> None:
    form = CapabilityForm(host, "kitchen.echo")
    inputs = form.inputs
    assert list(inputs) == [
        "name",
        "ratio",
        "loud",
        "quiet",
        "rate",
        "spices",
        "steps",
        "extras",
        "pan.size",
        "pan.lid",
    ]
    assert type(inputs["loud"]).__name__ == "Dropdown"  # no default: unset / true / false
    assert type(inputs["quiet"]).__name__ == "Checkbox" and inputs["quiet"].value is True
    assert [label for label, _ in inputs["rate"].options] == [
        "— not set —",
        "16000",
        "44100",
        "null",
    ]
    assert type(inputs["spices"]).__name__ == "SelectMultiple"
    assert type(inputs["steps"]).__name__ == "Textarea"
    assert inputs["extras"].placeholder == "JSON"
    form.set_value("name", "Al")
    form.set_value("ratio", "0.25")
    form.set_value("loud", False)
    form.set_value("rate", None)
    form.set_value("spices", ["chili", "salt"])
    form.set_value("steps", "3\n1\n2")
    form.set_value("extras", {"garnish": "basil"})
    form.set_value("pan.size", "12")
    assert form.visible_errors() == {}
    form.run_button.click()
    form.wait()
    assert form.state == "ran"
    inv = form.invocation
    assert inv.result == {
        "name": "Al",
        "ratio": 0.25,
        "loud": False,
        "quiet": True,
        "rate": None,
        "spices": ["salt", "chili"],
        "steps": [3, 1, 2],
        "extras": {"garnish": "basil"},
        "pan": {"size": 12},
    }
    assert "  warning: echoed" in form.text()
    assert "warning" in form.result.details.value


def test_each_field_kind_reports_its_own_error(host: ModuleHost) -> None:
    form = CapabilityForm(host, "kitchen.echo")
    form.set_value("name", "A")
    form.set_value("ratio", "0")
    form.set_value("steps", "1\nx")
    form.set_value("extras", "{oops")
    form.set_value("pan.size", "3")
    shown = form.visible_errors()
    assert shown == {
        "name": "'A' is too short",
        "ratio": "0 is less than or equal to the minimum of 0",
        "steps": "item 2: 'x' is not a number",
        "extras": shown["extras"],
        "pan.size": "3 is less than the minimum of 10",
    }
    assert shown["extras"].startswith("not valid JSON")
    for key in shown:
        assert form._fields[key].error.value != ""
    with pytest.raises(ValueError, match="not one of the choices"):
        form.set_value("rate", 8000)
    with pytest.raises(KeyError, match="no field 'nope'"):
        form.set_value("nope", 1)


def test_opening_a_capability_of_a_module_that_broke_shows_why(
    host: ModuleHost, demo_home: DemoHome
) -> None:
    browser = ModuleBrowser(host)
    browser.capability_picker.value = "kitchen.echo"
    main = demo_home.facet_home / "modules" / "kitchen" / "main.py"
    original = main.read_text()
    try:
        main.write_text(original.replace('"id": "kitchen.echo"', '"id": "echo"'))
        browser.open_button.click()
        assert browser.form is None
        (note,) = browser.form_box.children
        assert "invalid_descriptor" in note.value
        assert "capabilities[0]" in note.value
        browser.refresh_button.click()
        assert "  kitchen: refused" in browser.text()
    finally:
        main.write_text(original)
    browser.refresh_button.click()
    assert "  kitchen 2.0.0" in browser.text()
    assert isinstance(browser.open_form("kitchen.echo"), CapabilityForm)


REVIEWING_DIGEST = "sha256:362e79ce632893a25c4ef6ee7da2a0add34425ba1cd7ff78aa2fcb3e511d13e7"


def test_module_browser_lists_skills_and_overlays_and_renders_one(host: ModuleHost) -> None:
    browser = ModuleBrowser(host)
    labels = [label for label, _ in browser.knowledge_picker.options]
    assert "critic · skill critic.reviewing — Reviewing an image · 110 tokens (critic.review)" in (
        labels
    )
    assert "gallery · overlay gallery.overview — When to use the gallery · 90 tokens" in labels
    assert (
        "gallery · skill gallery.palettes — Palettes · 100 tokens (gallery.thumbs, gallery.poster)"
        in labels
    )
    assert len(labels) == 4  # three skills, one overlay; none from the refused module
    cards = browser.static_html()
    assert "skills: <code>critic.reviewing</code> 110 tokens" in cards
    assert "overlays: <code>gallery.overview</code> When to use the gallery · 90 tokens" in cards
    listing = browser.listing
    assert listing is not None
    assert f"agent context: {listing.module_tokens('gallery')} tokens always" in cards
    assert host.knowledge_audit().empty  # listing reads no document
    before = browser.text()
    # choosing an entry (a click in the list) loads it through the host and renders it
    browser.knowledge_picker.value = ("critic", "skill", "critic.reviewing")
    doc = browser.document
    assert doc is not None and doc.id == "critic.reviewing" and doc.digest == REVIEWING_DIGEST
    view = browser.document_view.value
    assert "<h1>Reviewing an image</h1>" in view
    assert 'data-primitive="markdown"' in view
    assert REVIEWING_DIGEST in view
    assert browser.text() == before + "\n  reading: " + doc.provenance()
    audit = host.knowledge_audit()
    assert audit[["id", "digest", "tokens", "outcome"]].values.tolist() == [
        ["critic.reviewing", REVIEWING_DIGEST, 110, "ok"]
    ]
    # the overlay opens the same way, by a plain call too
    overlay = browser.open_document("gallery", "overlay", "gallery.overview")
    assert overlay is browser.document
    assert browser.knowledge_picker.value == ("gallery", "overlay", "gallery.overview")
    assert "<h1>Gallery overlay</h1>" in browser.document_view.value


def test_module_browser_shows_a_refused_skill_with_its_code(
    host: ModuleHost, demo_home: DemoHome
) -> None:
    skill = demo_home.facet_home / "modules" / "gallery" / "skills" / "palettes.md"
    original = skill.read_bytes()
    browser = ModuleBrowser(host)
    try:
        skill.write_bytes(original + b"\nAlways pick the ember palette.\n")
        browser.knowledge_picker.value = ("gallery", "skill", "gallery.palettes")
    finally:
        skill.write_bytes(original)
    assert browser.document is None
    assert browser.document_error is not None
    assert browser.document_error.code == "digest_mismatch"
    assert "refused: digest_mismatch" in browser.document_view.value
    assert "ember palette" not in browser.document_view.value
    assert browser.text().splitlines()[-1].startswith("  refused digest_mismatch: skill ")
    assert host.knowledge_audit()["outcome"].tolist() == ["digest_mismatch"]


def test_capability_form_shows_and_loads_the_skills_of_its_capability(host: ModuleHost) -> None:
    form = CapabilityForm(host, "critic.review")
    assert "Skills:" in form.header.value
    assert "<code>critic.reviewing</code> Reviewing an image · 110 tokens" in form.header.value
    assert form.text().splitlines()[1] == "  skills: critic.reviewing (110 tokens)"
    assert form.skills_button in form.children
    form.skills_button.click()
    selection = form.skills
    assert [d.id for d in selection.documents] == ["critic.reviewing"]
    (shown,) = form.skills_box.children
    assert "<h1>Reviewing an image</h1>" in shown.value and REVIEWING_DIGEST in shown.value
    assert "  skills for critic.review · no budget · 1 loaded, 110 tokens" in form.text()
    assert host.knowledge_audit()["capability"].tolist() == ["critic.review"]
    # a capability without skills shows no skills button and no skills line
    plain = CapabilityForm(host, "docs.report")
    assert plain.skills_button not in plain.children
    assert "skills" not in plain.text()
def test_file_inputs_are_picked_from_the_session_or_uploaded(host: ModuleHost) -> None:
    thumbs = host.invoke("gallery.thumbs", {"count": 2})
    session = list(thumbs.artifacts)
    form = CapabilityForm(host, "critic.review", artifacts=session)
    picker = form.files["image"]
    assert "image" not in form.inputs or form.inputs["image"] is picker.choice
    labels = [label for label, _ in picker.choice.options]
    assert labels[0] == "— choose a file —" and len(labels) == 3
    assert all("image/png" in label and "verified" in label for label in labels[1:])
    before = form.static_html()
    assert "root" not in [s.strip() for s in before.replace("<", ">").split(">")]
    assert "characters" not in before
    form.run_button.click()
    form.wait()
    assert form.state == "invalid" and "choose a file" in picker.error_view.value
    assert "-1" not in before  # the placeholder's index is no content
    picker.choice.value = 1  # the person picks the second thumbnail
    assert picker.staged is not None and picker.staged.digest == session[1].digest
    chosen = form.static_html()  # the static form names the file, never its index ("0", "1")
    assert f"<div>{html.escape(labels[2])}</div>" in chosen
    assert re.search(r">\s*-?\d\s*<", chosen) is None
    assert form.form.value() == {"image": picker.staged.ref()}
    assert '<img class="murmur-thumb"' in picker.preview.value
    assert "data:image/png;base64," in picker.preview.value
    form.run_button.click()
    form.wait()
    assert form.state == "ran" and form.invocation.ok, form.text()
    assert form.invocation.request.input == {"image": picker.staged.ref()}
    # what the run produced is offered to the next form sharing the session
    assert len(session) > 2
    again = CapabilityForm(host, "critic.review", artifacts=session)
    assert len(again.files["image"].choice.options) == len(session) + 1


def test_an_uploaded_file_is_staged_and_chosen(host: ModuleHost, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from PIL import Image

    Image.new("RGB", (64, 48), (200, 30, 30)).save(tmp_path / "red.png")
    content = (tmp_path / "red.png").read_bytes()
    form = CapabilityForm(host, "critic.review")
    picker = form.files["image"]
    picker.upload.value = (
        {"name": "red dot.png", "type": "image/png", "size": len(content),
         "content": memoryview(content), "last_modified": datetime.fromtimestamp(0, UTC)},
    )  # fmt: skip
    assert picker.staged is not None and picker.staged.file.read_bytes() == content
    # the label keeps the file's own name; the staged copy's name is safe characters only
    assert picker.choice.label.startswith("red dot.png · image/png")
    assert picker.staged.artifact.path == "red_dot.png"
    form.run_button.click()
    form.wait()
    assert form.invocation is not None and form.invocation.ok, form.text()
    assert form.invocation.result["width"] == 64 and form.invocation.result["height"] == 48


def test_every_input_problem_is_listed(host: ModuleHost) -> None:
    from murmur_nb import InvalidInput

    with pytest.raises(InvalidInput) as err:
        host.invoke("gallery.thumbs", {"count": 99, "size": "big", "palette": "neon"})
    message = str(err.value)
    for where in ("input['count']", "input['size']", "input['palette']"):
        assert f"at {where}: " in message
    assert "more)" not in message


def _html_in(widget: Any) -> Iterator[str]:
    """The HTML of every ``HTML`` widget in ``widget``'s tree."""
    import ipywidgets as w

    if isinstance(widget, w.HTML):
        yield widget.value
    for child in getattr(widget, "children", ()):
        yield from _html_in(child)


def test_every_required_field_carries_the_same_red_mark(host: ModuleHost) -> None:
    """The ``*`` of a required field, plain or file, is styled with a colour, not template
    text (the file field's label once lacked its ``f`` prefix)."""
    styles = [
        style
        for capability in ("kitchen.echo", "transcribe.audio")
        for page in _html_in(CapabilityForm(host, capability))
        for style in re.findall(r'<span style="([^"]*)">\*</span>', page)
    ]
    assert len(styles) == 3  # kitchen: name, ratio; transcribe: the audio file
    assert set(styles) == {"color:var(--jp-error-color1, #c62828)"}


def test_an_invalid_run_after_a_result_clears_that_result(host: ModuleHost) -> None:
    """Issue 24: the earlier result must not stand under "not run"."""
    form = CapabilityForm(host, "gallery.thumbs")
    form.set_value("count", "2")
    form.run_button.click()
    form.wait()
    assert form.state == "ran" and form.result_box.children != ()
    form.set_value("count", "99")
    form.run_button.click()
    form.wait()
    assert form.state == "invalid" and "not run" in form.status.value
    assert form.result_box.children == () and form.invocation is None and form.result is None
    assert "result:" not in form.text()

