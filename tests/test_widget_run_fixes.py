"""A form's run, whatever ends it, and what the browser keeps of it (trial 2 reports).

Reset pressed while a run is out, a run stopped while it polls, a run the host cut short
(a deadline, a crash): each ends in the form and the browser's history as what happened,
and the browser keeps the form a user is filling. Driven from Python against real modules:
``sleepy.wait`` sleeps as long as it is asked, ``crashy.raise`` crashes, and the demo's
``studio.storyboard`` is a long-running job polled by its form.
"""

from __future__ import annotations

import hashlib
import html
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import ipywidgets as w
import pytest
from _modules import default_descriptor, install, write_descriptor
from IPython.core.formatters import DisplayFormatter

from murmur_nb import DemoHome, MissingRequirement, ModuleHost, Policy
from murmur_nb.widgets import CapabilityForm, InvocationView, LiveRun, ModuleBrowser

FACET_MODULES = [("sleepy", "sleepy"), ("crashy", "crashy")]


@pytest.fixture
def demo(demo_home: DemoHome) -> Iterator[ModuleHost]:
    with ModuleHost(home=demo_home.facet_home, policy=demo_home.policy(),
                    artifact_store=demo_home.artifact_store) as h:  # fmt: skip
        yield h


def _until(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_reset_during_a_run_cancels_it_and_the_history_says_so(facet_home: Path) -> None:
    """Reset stops the run that is out (its process is killed, as by the run's Cancel) and
    puts the defaults back; the run's end is still taken: Run works again, and the
    history lists the run as cancelled."""
    with ModuleHost(home=facet_home) as host:
        browser = ModuleBrowser(host)
        form = browser.open_form("sleepy.wait")
        form.set_value("seconds", "20")
        form.run_button.click()
        assert form.live is not None
        live = form.live
        _until(lambda: live.elapsed_s > 0.3)  # the module is on its way
        clicked = time.monotonic()
        form.reset_button.click()
        assert form.inputs["seconds"].value == ""  # the defaults are back at once
        form.wait(30)
        _until(lambda: len(browser.history) == 1)
        assert time.monotonic() - clicked < 15  # the 20 s run did not run out
        assert not form.run_button.disabled
        assert form.state == "cancelled" and "cancelled by you" in form.status.value
        (run,) = browser.history
        assert (run.status, run.input) == ("cancelled", {"seconds": 20})
        assert host.audit()["outcome"].tolist() == ["cancelled"]
        shown = browser.show_run(run)  # the killed run's record, said as the user's cancel
        assert isinstance(shown, InvocationView) and shown.status == "cancelled"
        assert "cancelled" in shown.header.value and "error:" not in shown.header.value
        # and the form runs again
        form.set_value("seconds", "0")
        form.run_button.click()
        form.wait(30)
        _until(lambda: len(browser.history) == 2)
        assert form.state == "ran" and [r.status for r in browser.history] == ["cancelled", "ok"]


def test_show_of_a_run_cut_short_by_the_host_gives_its_code_and_message(
    facet_home: Path,
) -> None:
    """A run past its deadline (and a crash) leaves the host's error and the record it
    carries: Show draws that record under the error's code and message, not as "error"."""
    with ModuleHost(home=facet_home, policy=Policy(deadline_ms=500)) as host:
        browser = ModuleBrowser(host)
        form = browser.open_form("sleepy.wait")
        form.set_value("seconds", "5")
        form.run_button.click()
        form.wait(30)
        _until(lambda: len(browser.history) == 1)
        assert form.error is not None and form.error.code == "deadline_exceeded"
        (run,) = browser.history
        assert (run.status, run.outcome) == ("failed", "deadline_exceeded")
        view = browser.show_run(run)
        assert isinstance(view, InvocationView) and view.error is form.error
        text = view.text()
        assert text.splitlines()[0] == "InvocationView sleepy.wait: deadline_exceeded"
        assert f"  error deadline_exceeded: {form.error.message}" in text
        assert "deadline_exceeded" in view.header.value
        assert html.escape(form.error.message) in view.details.value
        assert "was killed by SIGKILL" in text  # the record's evidence is still shown

        crashed = browser.open_form("crashy.raise")
        crashed.run_button.click()
        crashed.wait(30)
        _until(lambda: len(browser.history) == 2)
        shown = browser.show_run(browser.history[-1])
        assert crashed.error is not None and crashed.error.code == "protocol_violation"
        said = shown.text()
        assert said.startswith("InvocationView crashy.raise: protocol_violation")
        assert f"error protocol_violation: {crashed.error.message}" in said
        assert "ZeroDivisionError" in said


def test_a_dotted_key_fills_a_file_input_and_a_str_is_no_host(demo: ModuleHost) -> None:
    """``values=`` by dotted key, as documented, for a file input too: its ``root`` and
    ``path`` make one reference. A str where the host goes is a TypeError that says what
    the form takes."""
    staged = demo.stage(demo.invoke("gallery.thumbs", {"count": 1}).artifacts[0])
    ref = staged.ref()
    dotted = {"image.root": ref["root"], "image.path": ref["path"]}
    form = CapabilityForm(demo, "critic.review", staged=[staged], values=dotted)
    assert form.files["image"].staged is staged
    assert form.form.value()["image"] == ref
    form.set_value("image.path", ref["path"])  # the same file again: nothing changes
    assert form.files["image"].staged is staged and form.form.errors() == {}
    with pytest.raises(TypeError, match="CapabilityForm takes a ModuleHost"):
        CapabilityForm("host", "gallery.thumbs")  # type: ignore[arg-type]


def test_text_plain_is_readable_and_each_value_is_cut(demo: ModuleHost) -> None:
    form = CapabilityForm(demo, "docs.report")
    form.set_value("title", "Ünïcødé 名前")
    assert '  title (string) = "Ünïcødé 名前"' in form.text()
    form.set_value("title", "ü" * 200_000)
    text = form._repr_mimebundle_()["text/plain"]
    (line,) = [x for x in text.splitlines() if x.startswith("  title")]
    value = line.split(" = ", 1)[1]
    assert len(text) < 2_000 and value.startswith('"ü') and "ü…" in value


def test_clicking_the_open_capability_again_keeps_its_form(
    demo: ModuleHost, facet_home: Path
) -> None:
    """Its button, the picker's "Open form", or the setup panel's capability again: the
    form open for it stays, with what was typed in it."""
    browser = ModuleBrowser(demo)
    browser.capability_buttons["docs.report"].click()
    form = browser.form
    assert form is not None
    form.set_value("title", "my typed title")
    browser.capability_buttons["docs.report"].click()
    assert browser.form is form and browser.form_box.children == (form,)
    browser.open_button.click()  # the picker holds docs.report
    assert browser.form is form and form.form.value()["title"] == "my typed title"
    browser.capability_buttons["gallery.thumbs"].click()  # another one: its own form
    assert browser.form is not form and browser.form.capability_id == "gallery.thumbs"
    # a form opened past its module's setup steps stays too
    cap = next(c.id for c in demo.describe("transcribe").capabilities)
    browser.capability_buttons[cap].click()
    browser.form_box.children[0].children[1].click()  # "Show the form anyway"
    anyway = browser.form
    assert anyway is not None and anyway.capability_id == cap
    browser.capability_buttons[cap].click()
    assert browser.form is anyway and browser.form_box.children == (anyway,)
    # a run that is out stays in view when its capability is clicked again
    with ModuleHost(home=facet_home) as host:
        slow = ModuleBrowser(host)
        running = slow.open_form("sleepy.wait")
        running.set_value("seconds", "1")
        running.run_button.click()
        slow.capability_buttons["sleepy.wait"].click()
        assert slow.form is running and running.state == "running"
        running.wait(30)
        assert running.state == "ran"


def test_stopped_polling_is_a_stopped_run_not_an_ok_one(demo: ModuleHost) -> None:
    """Stop polling leaves the job running: the form and the history say ``stopped``;
    Cancel while polling says ``cancelled``. Neither is ``ok``."""
    browser = ModuleBrowser(demo)
    form = browser.open_form("studio.storyboard")
    assert form is not None
    for rounds, (click, said) in enumerate((("stop_button", "stopped"),
                                            ("cancel_button", "cancelled")), 1):  # fmt: skip
        form.run_button.click()
        live = form.live
        assert live is not None
        _until(lambda live=live: live.state == "polling")  # type: ignore[misc]
        getattr(live, click).click()
        form.wait(30)
        assert live.state == said and live.last.result["state"] != "done"
        assert form.ran_status == said and form.state == "ran"
        assert said in form.status.value and "still" in form.status.value
        _until(lambda n=rounds: len(browser.history) == n)  # type: ignore[misc]
        run = browser.history[-1]
        assert (run.status, run.outcome) == (said, said)
    assert browser.text().endswith("runs: 2 (last: studio.storyboard cancelled)")


def _drawn(widget: w.Widget) -> dict[str, int]:
    """Characters of what ``widget`` shows: its HTML and text representations, and the
    values of every HTML widget inside it (what a notebook saves of its state)."""
    data, _ = DisplayFormatter().format(widget)
    sizes = {str(k): len(v) for k, v in data.items() if isinstance(v, str)}
    stack, inside = [widget], 0
    while stack:
        child = stack.pop()
        inside += len(child.value) if isinstance(child, w.HTML) else 0
        stack.extend(getattr(child, "children", ()))
    return {**sizes, "html widgets": inside}


def test_a_host_error_of_megabytes_is_cut_in_the_run_the_form_and_the_browser(
    tmp_path: Path,
) -> None:
    """A module declares a requirement it lacks with a 3 MB ``detail``: the host's
    ``MissingRequirement`` quotes it, and the LiveRun, the form and the browser's history put
    it whole into their HTML and text (3 MB each, at every redraw). Each now cuts it at 2,000
    characters, as every display of a module's words; the error object keeps it whole."""
    home = tmp_path / "home"
    folder = install(home, "plain")
    descriptor = default_descriptor(home, "plain")
    descriptor["requirements"] = [{"kind": "binary", "name": "tool", "available": False,
                                   "detail": "D" * 3_000_000}]  # fmt: skip
    write_descriptor(folder, descriptor)
    with ModuleHost(home=home) as host:
        ended = threading.Event()
        run = LiveRun(host, "plain.echo", {"count": 1}, on_done=lambda _run: ended.set())
        assert ended.wait(30) and run.state == "refused"
        browser = ModuleBrowser(host)
        form = browser.open_form("plain.echo", setup_first=False)
        form.set_value("count", "1")
        form.run_button.click()
        form.wait(30)
        _until(lambda: len(browser.history) == 1)
        shown = browser.show_run(browser.history[0])
    assert isinstance(shown, w.HTML)  # nothing came back: the host's error
    for name, widget in (("run", run), ("form", form), ("history", shown)):
        sizes = _drawn(widget)
        assert max(sizes.values()) < 16_000, (name, sizes)
    for error in (run.error, form.error, browser.history[0].error):
        assert isinstance(error, MissingRequirement) and len(error.message) > 3_000_000
    assert run.error is not None
    cut = run.error.message[:2_000] + "…"  # the message as every display cuts it
    for name, text in (("run", run.text()), ("run status", html.unescape(run.status.value)),
                       ("form", form.text()), ("form status", html.unescape(form.status.value)),
                       ("history", html.unescape(shown.value))):  # fmt: skip
        assert cut in text and "D" * 2_000 not in text, name


def _hostile_descriptor(home: Path, size: int) -> dict[str, str]:
    """Install module ``plain`` declaring ``size`` characters in every text of its descriptor
    the browser and its form show; return them by name (each a run of one letter)."""
    folder = install(home, "plain")
    (folder / "doc.md").write_text("# a skill\n")
    texts = {name: letter * size for name, letter in (
        ("name", "N"), ("version", "V"), ("capability id", "I"), ("title", "T"),
        ("summary", "S"), ("provider", "P"), ("skill id", "K"), ("unknown skill id", "U"),
        ("skill title", "L"), ("overlay id", "O"), ("overlay title", "Q"),
        ("requirement name", "R"), ("requirement detail", "D"), ("field name", "X"),
        ("field title", "Y"), ("field description", "Z"), ("field option", "E"),
    )}  # fmt: skip
    descriptor = default_descriptor(home, "plain")
    digest = "sha256:" + "0" * 64
    cap = descriptor["capabilities"][0]  # plain.echo, whose input is echo_in
    cap.update(id="plain." + texts["capability id"], title=texts["title"],
               summary=texts["summary"], skills=[texts["skill id"], texts["unknown skill id"]])
    cap["effects"]["provider"] = texts["provider"]
    descriptor["capabilities"][1]["skills"] = [texts["skill id"]]
    descriptor.update(
        name=texts["name"], version=texts["version"],
        skills=[{"id": texts["skill id"], "title": texts["skill title"], "summary": "s",
                 "path": "doc.md", "digest": digest, "tokens": 5}],
        agent_overlays=[{"id": texts["overlay id"], "title": texts["overlay title"],
                         "path": "doc.md", "digest": digest, "tokens": 5}],
        requirements=[{"kind": "binary", "name": texts["requirement name"], "available": False,
                       "detail": texts["requirement detail"]}],
    )  # fmt: skip
    descriptor["request_schemas"]["echo_in"]["properties"][texts["field name"]] = {
        "type": "string", "title": texts["field title"],
        "description": texts["field description"], "enum": [texts["field option"], "plain"],
    }  # fmt: skip
    write_descriptor(folder, descriptor)
    return texts


def _shown(widget: w.Widget) -> list[str]:
    """Every text ``widget`` shows or sends to the page: its HTML and text representations,
    and each value, description, tooltip and option label of the widgets inside it (a
    choice's value stays in the kernel: the page gets its index)."""
    data, _ = DisplayFormatter().format(widget)
    out = [v for v in data.values() if isinstance(v, str)]
    stack = [widget]
    while stack:
        child = stack.pop()
        options = getattr(child, "options", None)
        names = ("description", "tooltip", "placeholder", *(() if options else ("value",)))
        out += [value for name in names
                if isinstance(value := getattr(child, name, None), str)]  # fmt: skip
        out += [o[0] if isinstance(o, tuple) else str(o) for o in options or ()]
        stack.extend(getattr(child, "children", ()))
    return out


def test_a_descriptor_of_megabytes_in_every_text_is_cut_in_the_browser_and_its_form(
    tmp_path: Path,
) -> None:
    """A module's descriptor holds 2 MB in each text the browser draws: its name, version,
    a capability's id, title, summary and provider, skill and overlay ids and titles, a
    requirement's name and detail, and a request field's name, title, description and
    option. The browser and its form showed each whole (the browser was 15 MB of HTML and
    5 MB of text with 1 MB in each); each is now cut by the one rule (a label at 200
    characters, a message at 2,000) and the browser stays under 200 kB at every step, while
    the descriptor, the setup steps and the picker's value keep them whole."""
    home = tmp_path / "home"
    texts = _hostile_descriptor(home, 2_000_000)
    cap_id = "plain." + texts["capability id"]
    policy = Policy(describe_max_output_bytes=64 << 20)
    with ModuleHost(home=home, policy=policy) as host:
        browser = ModuleBrowser(host)
        steps = [("browser", browser)]
        assert browser.open_form(cap_id) is None  # its setup steps first
        steps.append(("setup panel", browser))
        form = browser.open_form(cap_id, setup_first=False)
        steps += [("form", browser), ("the form alone", form)]
        browser.knowledge_picker.value = browser.knowledge_picker.options[0][1]
        steps.append(("a document chosen", browser))
        form.set_value(texts["field name"], texts["field option"])
        form.run_button.click()
        form.wait(30)
        steps += [("a run refused", browser), ("the form after it", form)]
        for name, widget in steps:
            shown = _shown(widget)
            assert sum(map(len, shown)) < 200_000, (name, sorted(map(len, shown))[-3:])
            whole = "\n".join(html.unescape(text) for text in shown)
            for field, text in texts.items():  # each is shown, cut
                assert text[:2_001] not in whole, (name, field)
        whole = "\n".join(html.unescape(text) for text in _shown(browser))
        declared = {**texts, "capability id": cap_id}
        del declared["field name"]  # its title is shown instead
        missing = [f for f, text in declared.items() if text[:200] + "…" not in whole]
        assert missing == [], missing
        assert texts["requirement detail"][:2_000] + "…" in whole  # a message: 2,000
        # what the module declared stays whole where the widgets keep it
        assert browser.capability_picker.value == cap_id
        assert cap_id in browser.capability_buttons and form.capability_id == cap_id
        assert browser.setup_steps == [
            f"binary {texts['requirement name']}: {texts['requirement detail']}"
        ]
        assert form.capability.title == texts["title"]
        assert browser.modules[0].descriptor is not None
        assert browser.modules[0].descriptor.name == texts["name"]


def test_wait_returns_once_the_final_status_is_drawn(tmp_path: Path) -> None:
    """``LiveRun.wait()`` returned as soon as the worker signalled the end, and the worker
    drew the final status after that: code that waits, then reads the widget, read
    ``running`` (32 of 50 runs with threads switching every microsecond). The end is now
    drawn, then signalled; each run here is read right after its wait."""
    home = tmp_path / "home"
    install(home, "plain")
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: the race shows
    try:
        with ModuleHost(home=home) as host:
            stale = []
            for i in range(40):
                run = LiveRun(host, "plain.echo", {"count": 1})
                assert run.wait(30)
                status, text = run.status.value, run.text()
                if 'data-state="ok"' not in status or not text.startswith("LiveRun plain.echo: ok"):
                    stale.append((i, status[:80], text[:40]))
    finally:
        sys.setswitchinterval(interval)
    assert stale == []


def test_the_form_and_the_invocation_view_cut_values_by_the_one_rule(tmp_path: Path) -> None:
    """The widgets cut a value's text with a helper of their own (``clip``: ``limit - 1``
    characters and ``…``) beside the one rule every renderer uses (``_rules.clipped``:
    ``chars`` characters and ``…``), so the same limit meant two lengths. They cut by the
    one rule now, at limits that show no more than before (200 and 300 characters)."""
    from murmur_nb._rules import clipped  # private: the one rule the widgets must cut by
    from murmur_nb.widgets._capability_form import (  # private: the limit it cuts a value at
        TEXT_VALUE_CHARS,
    )
    from murmur_nb.widgets._invocation_view import (  # private: the limit of its result line
        RESULT_LINE_CHARS,
    )

    home = tmp_path / "home"
    install(home, "plain")
    with ModuleHost(home=home) as host:
        form = CapabilityForm(host, "plain.echo")
        form.set_value("count", "9" * 250)
        inv = host.invoke("plain.echo", {"count": 1})
    value = clipped("9" * 250, TEXT_VALUE_CHARS)
    assert f"(integer) = {value}\n" in form.text() + "\n" and len(value) <= 200
    result = json.dumps(inv.result, ensure_ascii=False, sort_keys=True, default=str)
    assert len(result) > 300
    line = clipped(result, RESULT_LINE_CHARS)
    assert f"  result: {line}\n" in InvocationView(inv, render=False).text() and len(line) <= 300


def _listing_descriptor(home: Path, count: int) -> None:
    """Install ``refused``, whose ``count`` capabilities each break the protocol, and
    ``plain``, which declares ``count`` unmet requirements, skills, overlays and unknown
    skill ids (each a warning) listed by ``plain.echo``."""
    folder = install(home, "refused")
    descriptor = default_descriptor(home, "refused")
    first = descriptor["capabilities"][0]
    descriptor["capabilities"] = [dict(first, id=f"not an id {i}") for i in range(count)]
    write_descriptor(folder, descriptor)
    folder = install(home, "plain")
    (folder / "doc.md").write_text("# a skill\n")
    descriptor = default_descriptor(home, "plain")
    digest = "sha256:" + hashlib.sha256(b"# a skill\n").hexdigest()
    descriptor.update(
        requirements=[{"kind": "binary", "name": f"tool-{i}", "available": False,
                       "detail": "missing"} for i in range(count)],
        skills=[{"id": f"skill-{i}", "title": "t", "summary": "s", "path": "doc.md",
                 "digest": digest, "tokens": 5} for i in range(count)],
        agent_overlays=[{"id": f"overlay-{i}", "title": "t", "path": "doc.md",
                         "digest": digest, "tokens": 5} for i in range(count)],
    )  # fmt: skip
    descriptor["capabilities"][0]["skills"] = [
        *(f"skill-{i}" for i in range(count)), *(f"unknown-{i}" for i in range(count))
    ]
    write_descriptor(folder, descriptor)


def test_a_modules_thousands_of_problems_requirements_and_skills_are_a_dozen_lines_each(
    tmp_path: Path,
) -> None:
    """A refused module's problems, a module's unmet requirements (its card, its text, its
    setup steps), a capability's skills (its row, its form, the skills it loads), a
    module's overlays, warnings and knowledge list: each was drawn whole, an entry per
    line (5,000 of each made the browser megabytes). Each view now draws the first dozen
    (the knowledge list 500) and one line counting the rest and naming what keeps them all."""
    home = tmp_path / "home"
    _listing_descriptor(home, 5_000)
    policy = Policy(describe_max_output_bytes=64 << 20)
    with ModuleHost(home=home, policy=policy) as host:
        browser = ModuleBrowser(host)
        plain, refused = browser.modules  # by id
        assert (len(refused.errors), len(plain.unmet_requirements)) == (5_000, 5_000)
        assert len(plain.warnings) == 5_000
        steps = [("browser", browser)]
        assert browser.open_form("plain.echo") is None  # its setup steps first
        steps.append(("setup panel", browser))
        setup = "\n".join(html.unescape(t) for t in _shown(browser.form_box))
        assert "more (ModuleBrowser.setup_steps keeps them all)" in setup
        form = browser.open_form("plain.echo", setup_first=False)
        selection = form.show_skills()
        steps += [("form", browser), ("the form alone", form)]
        for name, widget in steps:
            shown = _shown(widget)
            assert sum(map(len, shown)) < 200_000, (name, sorted(map(len, shown))[-3:])
        text, page = browser.text(), "\n".join(html.unescape(t) for t in _shown(browser))
        for whole in ("ModuleBrowser.modules[1].errors", "ModuleBrowser.modules[0].warnings",
                      "ModuleBrowser.modules[0].unmet_requirements"):  # fmt: skip
            assert f"… and 4988 more ({whole} keeps them all)" in text, whole
            assert f"… and 4988 more ({whole} keeps them all)" in page, whole
        for whole in ("ModuleBrowser.modules[0].descriptor.capabilities[0].skills",
                      "ModuleBrowser.modules[0].descriptor.agent_overlays",
                      "CapabilityForm.capability.skills"):  # fmt: skip
            assert f"more ({whole} keeps them all)" in page, whole
        assert "… and 9500 more skills and overlays" in page
        assert "… and 9988 more (CapabilityForm.capability.skills keeps them all)" in form.text()
        assert selection is not None and len(selection.documents) == 5_000
        assert "… and 4988 more (SkillSelection.documents keeps them all)" in form.text()
        assert "… and 4988 more (SkillSelection.left_out keeps them all)" in form.text()
        # the lists themselves stay whole
        assert len(browser.setup_steps) == 5_000 and len(form.capability.skills or ()) == 10_000
        assert len(browser.knowledge_picker.options) == 500
        assert browser.open_document("plain", "skill", "skill-4999") is not None
        assert browser.knowledge_picker.value == ("plain", "skill", "skill-4999")


def test_a_schema_of_huge_enums_and_thousands_of_properties_draws_a_bounded_form(
    tmp_path: Path,
) -> None:
    """A request schema is a module's to write: an enum of 100,000 options was a dropdown of
    100,000 (1.4 s, 1.2 MB of option labels), 5,000 properties were 25,022 widgets (22 s),
    and ``$ref`` fan-out multiplies fields level by level. An enum past ``MAX_OPTIONS`` is
    typed (its note says where the schema lists them all), and past ``MAX_FIELDS`` fields
    an object is edited as JSON text; every value can still be sent."""
    home = tmp_path / "home"
    folder = install(home, "plain")
    descriptor = default_descriptor(home, "plain")
    schema = descriptor["request_schemas"]["echo_in"]
    many = [f"option-{i}" for i in range(100_000)]
    level: dict[str, object] = {"type": "string"}
    schema["$defs"] = {}
    for depth in range(5):  # 6 properties a level, 5 levels: 7,776 leaves
        schema["$defs"][f"l{depth}"] = level
        level = {"type": "object",
                 "properties": {f"p{i}": {"$ref": f"#/$defs/l{depth}"} for i in range(6)}}
    schema["properties"].update(
        pick={"type": "string", "enum": many},
        picks={"type": "array", "items": {"enum": many}},
        number={"enum": list(range(1_000))},
        fanout=level,
        wide={"type": "object", "properties": {f"k{i}": {"type": "string"} for i in range(5_000)}},
    )  # fmt: skip
    write_descriptor(folder, descriptor)
    policy = Policy(describe_max_output_bytes=64 << 20)
    with ModuleHost(home=home, policy=policy) as host:
        started = time.perf_counter()
        form = CapabilityForm(host, "plain.echo")
        took = time.perf_counter() - started
        widgets, stack = 0, [form]
        while stack:
            widgets += 1
            stack.extend(getattr(stack.pop(), "children", ()))
        shown = _shown(form)
        assert widgets < 1_000 and took < 10, (widgets, took)
        assert sum(map(len, shown)) < 200_000, sorted(map(len, shown))[-3:]
        assert len(form.form.fields) <= 110  # MAX_FIELDS (100), their objects and the root
        page = "\n".join(html.unescape(t) for t in shown)
        assert "one of 100,000 choices, typed" in page
        assert "form.field('pick').schema lists them all" in page
        assert "5,000 properties, more than the" in page
        form.set_value("count", "1")
        form.set_value("pick", "option-99999")
        form.set_value("picks", "option-5\noption-99998")
        form.set_value("number", "999")
        form.set_value("wide", json.dumps({"k4999": "x"}))
        assert form.visible_errors() == {}
        value = form.form.value()
        assert value["pick"] == "option-99999" and value["picks"] == ["option-5", "option-99998"]
        assert (value["number"], value["wide"]) == (999, {"k4999": "x"})
        form.set_value("pick", "not an option")
        assert "pick" in form.form.errors()
