"""The hook checker on real components: the demo hook (componentize-py), a correct WAT hook, and
one WAT hook per rule with that rule's fault seeded (``tests/wat/checked.wat`` spliced into
``tests/wat/component.wat``, with wasi:random imported for the determinism fault).

Calls go through the real ``HookHost``. Lowering 10,000 messages into a call costs the host
seconds on a loaded machine, and that time counts against the hook's limit, so the tests run
the checks under a ``murmur.yaml`` with a generous ``time_ms``; the limit rule is tested with
limits that really bind (memory, result size).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import wasmtime
from _wat import HOST, RANDOM

import murmur_nb as mnb

pytestmark = pytest.mark.slow

WAT = Path(__file__).with_name("wat")
RULES = ["world.exports", "world.imports", "handlers.answer", "limits", "determinism",
         "messages.well_formed", "grant.not_granted"]  # fmt: skip
#: The core-module faults of checked.wat, by the rule each breaks.
CORE_FAULTS = {"handlers.answer": 1, "limits": 2, "messages.well_formed": 3, "determinism": 4,
               "grant.not_granted": 5}  # fmt: skip
VAULT = '(component\n  (import "murmur:secrets/vault@1.0.0" (instance (export "get" (func))))\n'


def checked_component(fault: str | None = None) -> bytes:
    """The checked hook with the fault that breaks ``fault`` (a rule id), or none."""
    core = (WAT / "checked.wat").read_text(encoding="utf-8")
    core = core.replace("@FAULT@", str(CORE_FAULTS.get(fault or "", 0)))
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    text = text.replace("(core module $main @MAIN@)",
                        "(core module $main" + core[core.index("(module") + len("(module"):])
    text = text.replace(HOST, RANDOM)  # fmt: skip
    if fault == "world.exports":
        text = text.replace('(export "on-compact" (func $on-compact))', "")
    if fault == "world.imports":
        text = text.replace("(component\n", VAULT, 1)
    return wasmtime.wat2wasm(text)


def capsule(folder: Path, fault: str | None = None, limits: str = "{time_ms: 20000}") -> Path:
    """``folder/murmur.yaml`` naming ``folder/hooks/hook.wasm`` (the hook with ``fault``)."""
    (folder / "hooks").mkdir(parents=True, exist_ok=True)
    (folder / "hooks" / "hook.wasm").write_bytes(checked_component(fault))
    config = folder / "murmur.yaml"
    config.write_text(
        f"hook_limits: {limits}\nhooks:\n  checked:\n    component: hooks/hook.wasm\n",
        encoding="utf-8",
    )
    return config


class Reports(dict[str | None, mnb.HookCheckReport]):
    """The report on the correct WAT hook (``None``) or the one with a rule's fault, made on
    first use and kept for the file (a check takes seconds: each test pays for its own)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        super().__init__()
        self.factory = factory

    def __missing__(self, fault: str | None) -> mnb.HookCheckReport:
        config = capsule(self.factory.mktemp("capsule"), fault)
        report = mnb.check_hook(config.parent / "hooks" / "hook.wasm", config=config)
        self[fault] = report
        return report


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Reports:
    return Reports(tmp_path_factory)


def test_the_demo_hook_passes(tmp_path: Path) -> None:
    component = mnb.build_demo_hook(tmp_path)  # componentize-py, cached by source digest
    report = mnb.check_hook(component)  # at the default limits (time_ms 5000)
    assert report.ok, report.summary()
    assert [r.check for r in report] == RULES
    assert all(r.status == "pass" for r in report), report.summary()
    assert report.cases == {"empty": 0, "one": 1, "many": 10_000, "unicode": 3, "huge": 3,
                            "odd-roles": 8, "sparse": 3}  # fmt: skip
    details = {r.check: r.detail for r in report}
    assert "read-messages answered not-granted once" in details["grant.not_granted"]
    assert "cannot read the conversation of check-one: not-granted" in details["grant.not_granted"]
    assert "it also exports exports, which the host ignores" in details["world.exports"]
    assert ": murmur:conversation/read@0.1.0, murmur:hook/lifecycle@0.8.0, " in details[
        "world.imports"]  # fmt: skip
    assert "WASI 0.2 interfaces (cli, clocks, " in details["world.imports"]


def test_a_correct_hook_passes_every_rule(reports: Reports) -> None:
    report = reports[None]
    assert report.ok, report.summary()
    assert [(r.check, r.status) for r in report] == [(rule, "pass") for rule in RULES]
    assert report.calls == 30
    assert report.limits["time_ms"] == 20_000
    assert str(report).startswith("PASS hook.wasm")


@pytest.mark.parametrize("rule", RULES)
def test_one_seeded_fault_fails_exactly_its_rule(
    rule: str, reports: Reports
) -> None:
    report = reports[rule]
    assert not report.ok
    assert [r.check for r in report.failures] == [rule], report.summary()
    failed = report.failures[0]
    assert failed.fix and failed.rule
    if rule.startswith("world."):  # the host refuses such a hook: nothing else can run
        assert [r.status for r in report][2:] == ["skipped"] * 5


EXPECTED_DETAIL = {
    "world.exports": "murmur:hook/handlers@0.8.0 has no on-compact",
    "world.imports": "it imports murmur:secrets/vault@1.0.0, which the host does not link",
    "handlers.answer": "on-compact on 'empty' (no messages): trap:",
    "limits": "on-compact on 'many' (10,000 messages): memory_limit:",
    "determinism": "on-task-start on 'empty' (no messages): ok '",
    "messages.well_formed": "on-compact on 'one' (one user message): message 0 has an empty id",
    "grant.not_granted": "without the read grant: on-task-start on 'one' (one user message): "
    "trap:",
}


@pytest.mark.parametrize("rule", RULES)
def test_the_failure_says_where_and_what(
    rule: str, reports: Reports
) -> None:
    failed = reports[rule].failures[0]
    assert failed.detail.startswith(EXPECTED_DETAIL[rule]), failed.detail
    assert f"  FAIL    {rule}: " in reports[rule].summary()
    assert f"          fix:  {failed.fix}" in reports[rule].summary()


def test_every_kind_of_malformed_message_is_named() -> None:
    # The rule's function directly: one WAT fault per kind would cost a full check each.
    from murmur_nb._checker.hook_check import message_problem  # private: the rule alone

    given = (mnb.Message("a", "user", "hi"),
             mnb.Message("t", "tool", '{"__murmur_tool_msg__":true,"tool_call_id":null,'
                         '"is_error":null,"body":1}'))  # fmt: skip
    summary = mnb.Message("s", "system", "Summary: 2 messages")
    assert message_problem(given, [*given, summary]) is None
    assert message_problem(given, [given[0], given[0]]) == "id 'a' is returned twice"
    assert message_problem(given, [mnb.Message("a", "user", "HI", name="x")]) == (
        "message 'a' keeps an input id but changed its content, name"
    )
    assert message_problem(given, [mnb.Message("n", "", "new")]) == (
        "new message 'n' has an empty role"
    )
    assert message_problem(given, [mnb.Message("n", "tool", "raw body")]) == (
        "tool message 'n' does not carry the tool-message envelope"
    )
    assert message_problem(given, [summary, mnb.Message("", "user", "x")]) == (
        "message 1 has an empty id"
    )


def test_a_case_a_limit_stopped_is_not_run_twice(reports: Reports) -> None:
    report = reports["limits"]
    assert report.calls == 28  # the 10,000-message case once, not twice
    determinism = {r.check: r for r in report}["determinism"]
    assert determinism.status == "pass"
    assert determinism.detail == (
        "12 calls made twice gave the same answers; 2 not compared, a limit stopped them"
    )


def test_answers_are_held_to_the_limits_murmur_yaml_sets(tmp_path: Path) -> None:
    """The entry naming the component gives the limits; a result past them fails ``limits``."""
    config = capsule(tmp_path, limits="{time_ms: 20000, result_messages: 5000}")
    report = mnb.check_hook(tmp_path / "hooks" / "hook.wasm", config=config)
    assert report.limits["result_messages"] == 5000
    assert [r.check for r in report.failures] == ["limits"]
    assert report.failures[0].detail.startswith(
        "on-compact on 'many' (10,000 messages): result_too_large:"
    )
    with pytest.raises(mnb.HookConfigError, match="has no hook 'other' \\(it has: checked\\)"):
        mnb.check_hook(tmp_path / "hooks" / "hook.wasm", config=config, hook_id="other")


def test_a_hook_its_limits_do_not_let_load_fails_the_limits_rule(tmp_path: Path) -> None:
    """The world rules pass (the types are right), the host refuses to instantiate it."""
    config = capsule(tmp_path, limits="{instances: 1}")
    report = mnb.check_hook(tmp_path / "hooks" / "hook.wasm", config=config)
    assert [(r.check, r.status) for r in report] == [
        ("world.exports", "pass"), ("world.imports", "pass"), ("handlers.answer", "skipped"),
        ("limits", "fail"), ("determinism", "skipped"), ("messages.well_formed", "skipped"),
        ("grant.not_granted", "skipped"),
    ]  # fmt: skip
    assert "needs more core instances than its limit of 1" in report.failures[0].detail
    assert report.calls == 0
    text = report.summary()  # failures first, then what was skipped (issue 40)
    assert text.index("FAIL    limits") < text.index("SKIPPED handlers.answer"), text


def test_views_text_json_html_and_frame(reports: Reports) -> None:
    report = reports["world.imports"]
    data = json.loads(report.to_json())
    assert data["ok"] is False
    assert data["counts"] == {"fail": 1, "warn": 0, "skipped": 5, "pass": 1}
    assert [c["check"] for c in data["checks"]] == RULES
    assert data["digest"] == report.digest and len(data["digest"]) == 64
    page = report._repr_html_()
    assert "<table" not in page and "murmur:secrets/vault@1.0.0" in page
    # the module checker's report (issue 40): the failure first as a card, then the skipped
    # rules one line per reason, then the passes folded into one line
    assert page.index('data-status="fail" data-check="world.imports"') < page.index(
        "murmur-check-skipped") < page.index('<details class="murmur-check-passes"')
    assert "fails the hook checks" in page and "1 checks passed (world 1)" in page
    assert "text-align" not in page
    frame = report.to_frame()
    assert list(frame.columns) == ["check", "status", "detail", "rule", "fix"]
    assert frame.loc[frame.check == "world.imports", "status"].item() == "fail"


def test_a_file_that_is_not_a_component_fails_the_world_rule(tmp_path: Path) -> None:
    junk = tmp_path / "junk.wasm"
    junk.write_bytes(b"\0asm\x01\0\0\0 not really")
    report = mnb.check_hook(junk)
    assert [r.check for r in report.failures] == ["world.exports"]
    assert "is not a loadable component" in report.failures[0].detail
    with pytest.raises(mnb.HookError, match="is not a file"):
        mnb.check_hook(tmp_path / "missing.wasm")


def test_the_check_hook_command_prints_text_or_json_and_exits_on_failure(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "murmur_nb._checker.cli", "check-hook"]
    good = capsule(tmp_path / "good")
    ok = subprocess.run([*cli, str(good.parent / "hooks" / "hook.wasm"), "--config", str(good)],
                        capture_output=True, text=True, check=False)  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("PASS hook.wasm")
    bad = capsule(tmp_path / "bad", "world.exports")
    no = subprocess.run([*cli, "--json", str(bad.parent / "hooks" / "hook.wasm")],
                        capture_output=True, text=True, check=False)  # fmt: skip
    assert no.returncode == 1, no.stderr
    data = json.loads(no.stdout)
    assert [c["check"] for c in data["checks"] if c["status"] == "fail"] == ["world.exports"]
    missing = subprocess.run([*cli, str(tmp_path / "none.wasm")], capture_output=True,
                             text=True, check=False)  # fmt: skip
    assert missing.returncode == 2
    assert "is not a file" in missing.stderr


def test_ctrl_c_stops_the_command_cleanly(tmp_path: Path) -> None:
    """SIGINT while the command works on its generated records (loading the hook or calling
    it): exit 130, and the records are gone. (A SIGINT during a hook call itself is
    test_hook_exit's.)"""
    config = capsule(tmp_path / "capsule")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    command = [sys.executable, "-m", "murmur_nb._checker.cli", "check-hook",
               str(config.parent / "hooks" / "hook.wasm"), "--config", str(config)]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(scratch)}
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:  # fmt: skip
        deadline = time.monotonic() + 120
        while not list(scratch.glob("murmur-nb-check-hook-*/murmur/conversations/*.jsonl")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.01)
        # at once: a whole run can take barely a second once the hook is compiled, and a
        # SIGINT that comes while the process exits is no test of the clean stop (a 0.2 s
        # wait here once let a busy CI machine finish the run first: exit -2, not 130)
        assert proc.poll() is None, "the command finished before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "murmur-nb check-hook: interrupted; no report" in err
    assert out == ""
    assert not list(scratch.glob("murmur-nb-check-hook-*"))


def test_pytest_plugin_collects_one_test_per_rule(
    tmp_path: Path, pytester: pytest.Pytester
) -> None:
    """Found through the ``pytest11`` entry point, as a hook author's CI has it."""
    # pytester runs in this process and drops what a run imported afterwards; numpy (read on
    # the first record page) cannot be imported twice in one process, so it is loaded first
    import numpy  # noqa: F401

    good = capsule(tmp_path / "good")
    # the project's own failing test is not collected when no test path is named
    pytester.makepyfile(test_project="def test_of_the_project():\n    assert False\n")
    passed = pytester.runpytest("--hook", str(good.parent / "hooks" / "hook.wasm"),
                                "--hook-config", str(good))  # fmt: skip
    passed.assert_outcomes(passed=7)
    passed.stdout.fnmatch_lines(["collected 7 items"])  # the rules count as collected
    assert "test_of_the_project" not in passed.stdout.str()
    bad = capsule(tmp_path / "bad", "world.imports")
    result = pytester.runpytest("--hook", str(bad.parent / "hooks" / "hook.wasm"),
                                "--hook-config", str(bad), "-rs")  # fmt: skip
    assert result.ret == 1
    result.assert_outcomes(passed=1, failed=1, skipped=5)  # still only the hook's rules
    result.stdout.fnmatch_lines([
        "*world.imports failed*",
        "*detail: it imports murmur:secrets/vault@1.0.0, which the host does not link*",
        "*fix:*Drop the extra imports*",
    ])  # fmt: skip
