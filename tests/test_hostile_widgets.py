"""The widgets shown what someone else wrote: a hook's answers and errors, a conversation
record's roles, ids and contents, a module's titles and enum values. None of it can put
markup into a widget's HTML, blow a widget's value (and the comm message that carries it to
the browser) up to the size of what was written, or reorder a label with a bidirectional
override.

Each test drives the widget with the real thing: the hostile hook component of
``tests/test_hostile_hook_check.py`` run by a real :class:`~murmur_nb.HookHost`, a record file
written line by line as a hostile runtime would, or ``tests/modules/hostile_words.py`` run
through a real :class:`~murmur_nb.ModuleHost`; the assertions read the widget's own state.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import ipywidgets as w
import pytest
from _modules import install
from test_hostile_hook_check import capsule

import murmur_nb as mnb
from murmur_nb.widgets import (
    CapabilityForm,
    CompactionViewer,
    ConversationExplorer,
    HookConsole,
    ModuleBrowser,
)

#: Markup that runs script where HTML is inserted raw, quotes that end an attribute, and a
#: right-to-left override that makes what follows read backwards.
MARKUP = "<img src=x onerror=alert(1)>\"'><script>alert(2)</script>\u202egnp.exe"
#: What no widget HTML may hold raw.
RAW = ("<img", "<script", "\u202e")
#: The most characters a widget's HTML may cost for one hostile answer (a few cut labels
#: and messages, escaped).
BOUND = 64 * 1024


def raw_in(text: str) -> list[str]:
    return [r for r in RAW if r in text]


def strings_of(widget: Any) -> list[str]:
    """Every string of ``widget``'s tree that goes to the browser: HTML values, labels,
    tooltips, descriptions, option labels."""
    out: list[str] = []
    for name in widget.keys:
        value = getattr(widget, name, None)
        if isinstance(value, w.Widget):
            out += strings_of(value)
        elif isinstance(value, str):
            out.append(value)
        elif isinstance(value, tuple | list):
            for item in value:
                if isinstance(item, w.Widget):
                    out += strings_of(item)
                elif isinstance(item, str):
                    out.append(item)
    return out


# a hook's words


def test_a_hooks_huge_note_and_error_are_cut_in_the_console(tmp_path: Path) -> None:
    """A hook whose task-start note is 16 MiB (the default result limit), and one whose
    err is markup: fails before: the console put the whole note in its HTML (16 MiB, the
    comm message with it); now the note is cut as a message is (2,000 characters), and the
    markup is escaped."""
    _, config = capsule(tmp_path / "loud", 5)
    console = HookConsole(config, context_id="ctx")
    console.fire_task_start()
    assert console.results["hostile"].ok
    assert len(console.result_view.value) < BOUND, f"{len(console.result_view.value):,}"
    assert len(console.text()) < BOUND

    _, said = capsule(tmp_path / "said", 1)
    console = HookConsole(said, context_id="ctx")
    console.fire_task_start()
    assert console.results["hostile"].code == "guest_error"
    assert raw_in(console.result_view.value) == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in console.result_view.value


# a conversation record's words


def _record(home: Path, context_id: str, rows: list[dict[str, Any]]) -> None:
    """A record file as a runtime (here a hostile one) writes it: one JSON object a line."""
    folder = home / "conversations"
    folder.mkdir(exist_ok=True)
    with (folder / f"{context_id}.jsonl").open("w", encoding="utf-8") as record:
        record.writelines(json.dumps(row) + "\n" for row in rows)


def test_a_records_huge_and_hostile_messages_are_cut_and_escaped(murmur_home: Path) -> None:
    """A record whose messages are 4 MB of quotes each, one with a 1 MB id of markup, one
    whose role is markup with a right-to-left override and one a 1 MB role: fails before:
    the explorer's HTML held every body and id whole (each ``"`` six characters: 100 MB for
    the page), and the role filter offered the roles raw (the override reversing the label,
    1 MB in an option); now a body shows its first 10,000 characters and says where the whole
    is, ids and roles are cut, and the role filter's labels are escaped."""
    quotes = '"' * (4 << 20)
    _record(murmur_home, "ctx", [
        {"id": f"m{i}", "role": "user", "content": quotes} for i in range(4)
    ] + [
        {"id": MARKUP + "x" * (1 << 20), "role": "assistant", "content": MARKUP},
        {"id": "r1", "role": MARKUP, "content": "hi"},
        {"id": "r2", "role": "q" * (1 << 20), "content": "hi"},
    ])  # fmt: skip
    ex = ConversationExplorer(murmur_home, "ctx")
    assert ex.total == 7
    shown = ex.messages.value  # four bodies of 10,000 quotes, six characters each
    assert len(shown) < 4 * 6 * 10_000 + BOUND, f"{len(shown):,} characters"
    assert raw_in(shown) == []
    assert "Message.content keeps it whole" in shown
    labels = ex.role_filter._options_labels
    assert len("".join(labels)) < BOUND
    assert [label for label in labels if "\u202e" in label] == []  # text: markup is harmless
    ex.role_filter.value = MARKUP  # the filter still takes the role as the record has it
    assert [m.id for m in ex.visible_messages()] == ["r1"]
    assert raw_in(ex.status.value) == []
    for text in strings_of(ex):
        assert "\u202e" not in text, text[:300]
        assert len(text) < 4 * 6 * 10_000 + BOUND


# a module's words


@pytest.fixture
def hostile_host(tmp_path: Path) -> Any:
    """``hostile_words`` (its name, titles and summaries end in a right-to-left override),
    with a request schema whose titles, descriptions and enum values are :data:`MARKUP`."""
    from _modules import default_descriptor, write_descriptor

    home = tmp_path / "facet"
    folder = install(home, "evil", "hostile_words")
    desc = default_descriptor(home, "evil")
    desc["request_schemas"]["words"] = {"type": "object", "properties": {
        "pick": {"enum": [f"a {MARKUP}", f"b {MARKUP}"], "title": f"pick {MARKUP}",
                 "description": f"which {MARKUP}"},
        "many": {"type": "array", "items": {"enum": [f"m {MARKUP}"]}, "title": f"many {MARKUP}"},
        "text": {"type": "string", "title": f"text {MARKUP}", "description": f"say {MARKUP}"},
    }}  # fmt: skip
    for cap in desc["capabilities"]:
        cap["request_schema"] = "words"
    (folder / "o.md").write_text("# overlay\n", encoding="utf-8")
    digest = "sha256:" + hashlib.sha256(b"# overlay\n").hexdigest()
    desc["agent_overlays"] = [{"id": f"o {MARKUP}", "title": f"overlay {MARKUP}",
                               "path": "o.md", "digest": digest, "tokens": 1}]  # fmt: skip
    write_descriptor(folder, desc)
    with mnb.ModuleHost(home=home) as host:
        yield host


def test_a_modules_words_reach_no_label_or_tooltip_with_an_override(hostile_host: Any) -> None:
    """What the browser and a form show as plain text (a capability's tooltip, an enum's
    options, a field's accessible name, the knowledge list): fails before: the module's
    right-to-left override reached them raw, so ``gnp.exe`` read as ``exe.png`` (the
    capability picker already escaped it); now each is written as ``\\u202e``, as in the
    picker, and the HTML around them stays escaped."""
    browser = ModuleBrowser(hostile_host)
    form = browser.open_form("evil.ok")
    assert isinstance(form, CapabilityForm)
    for widget in (browser, form):
        for text in strings_of(widget):
            assert "\u202e" not in text, text[:300]
    assert any("\\u202e" in label for label in form.inputs["pick"]._options_labels)
    html = [v.value for v in _widgets(browser) if isinstance(v, w.HTML)]
    assert html and [raw_in(v) for v in html if raw_in(v)] == []


def _widgets(widget: Any) -> list[Any]:
    """``widget`` and every widget in its tree."""
    out = [widget]
    for name in widget.keys:
        value = getattr(widget, name, None)
        items = value if isinstance(value, tuple | list) else (value,)
        out += [x for item in items if isinstance(item, w.Widget) for x in _widgets(item)]
    return out


def test_a_file_a_module_named_reads_as_named_in_the_file_picker(tmp_path: Path) -> None:
    """A module makes ``invoice_\\u202egnp.exe`` (an ``.exe`` that reads as ``exe.png``):
    fails before: a file input's dropdown offered the name raw, reversed; now the option
    reads ``invoice_\\u202egnp.exe`` with the override written out."""
    from murmur_nb.widgets._file_picker import FilePicker  # private: a form's file input

    home = tmp_path / "facet"
    install(home, "plain")
    with mnb.ModuleHost(home=home, artifact_store=tmp_path / "store") as host:
        made = host.invoke("plain.make", {"files": [
            {"name": "invoice_\u202egnp.exe", "content": "MZ", "media_type": "image/png"}]})
        assert made.ok, made.error
        picker = FilePicker(host, list(made.artifacts), lambda _p: None)
        label = picker.choice._options_labels[1]
        assert label.startswith("invoice_\\u202egnp.exe · "), label
        picker.choice.value = 0
        assert "\u202e" not in picker.preview.value


def test_a_hooks_huge_ids_are_cut_in_the_compaction_viewer(tmp_path: Path) -> None:
    """The hostile hook answers compact with two messages whose id is 4 MiB: fails before:
    the viewer's HTML held both ids whole (8.4 MB); now each is cut to a label's length."""
    home = tmp_path / "murmur"
    home.mkdir()
    _record(home, "ctx", [{"id": "m1", "role": "user", "content": "hi"},
                                            {"id": "m2", "role": "assistant", "content": "yo"}])
    store = mnb.ConversationStore(home)
    _, config = capsule(tmp_path / "hook", 2)
    with mnb.HookHost.from_config(config, conversations=store) as hooks:
        results = mnb.replay(hooks, "*", progress=False)
        viewer = CompactionViewer(results, store)
    assert viewer.diff.ok and len(viewer.diff.after) == 2
    assert len(viewer.view.value) < BOUND, f"{len(viewer.view.value):,} characters"


# a long-running module's polls and a batch's rows

#: characters of hostile words a module answers with: a few MiB, within the 16 MiB bound
BIG = 4 << 20


@pytest.fixture
def live_host(tmp_path: Path) -> Any:
    """``tests/modules/hostile_live.py`` installed as ``evil``: its job's news, its errors,
    its stderr and its batch rows are markup, terminal escapes and an override, and MiBs."""
    install(tmp_path / "facet", "evil", "hostile_live")
    with mnb.ModuleHost(home=tmp_path / "facet") as host:
        yield host


def test_a_polled_jobs_huge_error_code_is_cut_in_the_live_run(live_host: Any) -> None:
    """The job's poll fails with a 4 MiB error code: fails before: the run's result view put
    the code whole in its state badge and its ``text/plain`` (5.2 MB of widget value, 4.2 MB
    of text); now the code is cut to a label's length there, as in the error line."""
    from murmur_nb.widgets import LiveRun

    run = LiveRun(live_host, "evil.start", {"big": BIG, "mode": "fail"}, interval=0.1)
    assert run.wait(120) and run.state == "failed" and run.polls == 1
    assert len(run.last.error.code) > BIG  # the invocation keeps it whole
    values = strings_of(run)
    assert sum(map(len, values)) < BOUND, f"{sum(map(len, values)):,} characters"
    assert [raw_in(v) for v in values if v.startswith("<") and raw_in(v)] == []
    assert len(run.text()) < BOUND and len(run._repr_mimebundle_()["text/html"]) < BOUND


def test_a_batch_rows_huge_error_code_is_cut_when_the_row_is_shown(live_host: Any) -> None:
    """Odd rows fail with a 4 MiB error code, even rows answer 4 MiB of words: fails before:
    a failed row, picked in the list, drew the code whole in the detail's state badge (a
    5.2 MB output); now every row shown and every label stays small, and no label holds an
    override or a terminal escape raw."""
    from murmur_nb.widgets import BatchView

    batch = live_host.map("evil.work", [{"n": i, "big": BIG} for i in range(4)],
                          background=True, progress=False)  # fmt: skip
    view = BatchView(batch, refresh_s=0.0)
    batch.wait(300)
    view.refresh()
    labels = [label for label, _ in view.rows.options]
    assert len(labels) == 4 and all(len(label) < 1000 for label in labels), labels
    assert not any(c in label for label in labels for c in ("\u202e", "\x1b", "\x9b"))
    for i in range(4):
        view.rows.value = i  # what a click on the row does
        html = view._repr_mimebundle_()["text/html"]
        assert len(html) < BOUND, f"row {i}: {len(html):,} characters"
        assert raw_in(html) == [] and len(view.shown.text()) < BOUND
