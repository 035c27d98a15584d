"""The module checker, from a user trial: each defect reproduced on a real module, then fixed.

Every module here is a real executable folder (``TRIAL``, the trial's stdlib-only module:
one capability ``<folder>.run`` taking ``{"text": str}`` and writing ``note.txt`` into its
write root ``out`` as an artifact), described from the ``descriptor.json`` beside it and
steered by ``knobs.json`` (a zero digest, a presentation hint, a sleep ...). Each test runs
it through ``mnb.check_module``, the ``murmur-nb`` command or the pytest plugin, as a module
author would.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import murmur_nb as mnb
from murmur_nb._checker.cli import main  # private: the console script's main(argv), in-process

TRIAL = r'''
import hashlib, json, sys, time, unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent
MOD = HERE.name
KNOBS = json.loads((HERE / "knobs.json").read_text()) if (HERE / "knobs.json").exists() else {}


def env(op, rid, arts=(), **kw):
    execution = {"local": True, "network": False, "external_writes": False, "provider": "",
                 "estimated_cost": 0, "actual_cost": 0, "artifacts": list(arts)}
    return {"protocol": "modproto.v1", "module": MOD, "operation": op, "request_id": rid,
            "warnings": [], "execution": execution, **kw}


def run(req):
    rid, inp = req.get("request_id", ""), req.get("input")
    usable = isinstance(inp, dict) and isinstance(inp.get("text"), str)
    if not usable and not KNOBS.get("accept_anything"):
        return env("invoke", rid, ok=False,
                   error={"code": "bad_input", "message": "text must be a string"})
    text = str(inp.get("text", "")) if isinstance(inp, dict) else ""
    if KNOBS.get("letters_only") and not all(unicodedata.category(c)[0] == "L" for c in text):
        raise SystemExit(f"not only letters: {text!r}")
    time.sleep(KNOBS.get("sleep", 0))
    data = text.encode()
    (Path(req["roots"]["out"]["path"]) / "note.txt").write_bytes(data)
    digest = "0" * 64 if KNOBS.get("bad_digest") else hashlib.sha256(data).hexdigest()
    art = {"id": "note", "kind": "note", "root": "out", "path": "note.txt",
           "media_type": KNOBS.get("media_type", "text/plain"), "bytes": len(data),
           "digest": "sha256:" + digest}
    if KNOBS.get("presentation"):
        art["presentation"] = KNOBS["presentation"]
    return env("invoke", rid, [art], ok=True, result={"n": len(text)})


if sys.argv[1] == "describe":
    desc = json.loads((HERE / "descriptor.json").read_text())
    print(json.dumps(env("describe", "", ok=True, result=desc)))
else:
    print(json.dumps(run(json.loads(sys.stdin.read()))))
'''


def descriptor(module_id: str, text: dict[str, Any] | None = None) -> dict[str, Any]:
    """The trial module's descriptor; ``text`` is the schema of its one input property."""
    effects = {"local": True, "network": False, "external_writes": False, "provider": "",
               "cost_known": True}  # fmt: skip
    cap = {"id": f"{module_id}.run", "title": "Run", "summary": "s", "request_schema": "in",
           "result_schema": "out", "artifact_schemas": ["note"], "skills": [],
           "long_running": False, "effects": effects}  # fmt: skip
    schema = {"type": "object", "properties": {"text": text or {"type": "string", "maxLength": 20}},
              "required": ["text"], "additionalProperties": False}  # fmt: skip
    permissions = {"filesystem_read": [], "filesystem_write": ["out"], "network": [],
                   "credentials": [], "paid_providers": [], "publish": False, "subprocess": []}
    return {"module": module_id, "name": "Trial", "version": "1",
            "protocol_versions": ["modproto.v1"], "capabilities": [cap],
            "request_schemas": {"in": schema}, "result_schemas": {"out": {"type": "object"}},
            "artifact_schemas": {"note": {}}, "agent_overlays": [], "skills": [],
            "requirements": [], "permissions": permissions}  # fmt: skip


def trial(
    folder: Path, *, text: dict[str, Any] | None = None,
    change: Callable[[dict[str, Any]], None] | None = None, **knobs: Any,
) -> Path:
    """The trial module in ``folder`` (its name is the module id), its descriptor changed by
    ``change``, its behaviour by ``knobs``."""
    folder.mkdir(parents=True)
    exe = folder / "module"
    exe.write_text(f"#!{sys.executable} -S\n{TRIAL}")
    exe.chmod(0o755)
    desc = descriptor(folder.name, text)
    if change is not None:
        change(desc)
    (folder / "descriptor.json").write_text(json.dumps(desc))
    if knobs:
        (folder / "knobs.json").write_text(json.dumps(knobs))
    return folder


def rows(report: mnb.CheckReport, check: str) -> list[mnb.CheckResult]:
    return [r for r in report if r.check == check]


def command(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``murmur-nb ARGV`` (as ``python -m murmur_nb``), in a subprocess."""
    return subprocess.run([sys.executable, "-m", "murmur_nb", *argv], capture_output=True,
                          text=True, timeout=300, check=False, **kwargs)  # fmt: skip


def run_reproduction(line: str, scratch: Path) -> subprocess.CompletedProcess[str]:
    """A report's reproduce line, run as a user would (``murmur-nb`` and ``python`` are this
    environment's), from another folder; its temporary files go to ``scratch``."""
    argv = shlex.split(line)
    if argv[0] == "murmur-nb":
        argv = [sys.executable, "-m", "murmur_nb", *argv[1:]]
    else:
        assert argv[0] == "python", line
        argv = [sys.executable, *argv[1:]]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                          cwd="/", env={**os.environ, "TMPDIR": str(scratch)})  # fmt: skip


# -- 1. schemas the generator could not handle ---------------------------------------------


def test_a_unicode_property_pattern_gets_inputs_that_match_it(tmp_path: Path) -> None:
    """``\\p{Letter}`` crashed the check with hypothesis's Unsatisfiable; the module (which
    crashes on any text that is not all letters) now gets random inputs, every one a match."""
    folder = trial(tmp_path / "pl", text={"type": "string", "pattern": "^\\p{Letter}+$"},
                   letters_only=True)  # fmt: skip
    report = mnb.check_module(folder, examples=5)
    assert report.ok, report.summary()
    assert report.inputs["pl.run"].get("random", 0) >= 3, report.inputs
    assert [r.status for r in rows(report, "invoke.generated_inputs")] == ["pass"]


def test_a_script_property_pattern_gets_inputs(tmp_path: Path) -> None:
    folder = trial(tmp_path / "gr", text={"type": "string",
                                          "pattern": "^[\\p{Script=Greek}\\d]{2,6}$"})
    report = mnb.check_module(folder, examples=4, boundaries=0)
    assert report.ok, report.summary()
    assert report.inputs["gr.run"].get("random", 0) >= 2, report.inputs


@pytest.mark.parametrize(
    "text",
    [
        {"type": "string", "minLength": 30, "maxLength": 20},
        {"enum": []},
        {"type": "integer", "minimum": 5, "maximum": 1},
    ],
    ids=["minLength>maxLength", "empty-enum", "minimum>maximum"],
)
def test_a_schema_no_input_satisfies_is_a_failure_not_a_crash(
    tmp_path: Path, text: dict[str, Any]
) -> None:
    report = mnb.check_module(trial(tmp_path / "un", text=text), examples=2)
    assert not report.ok
    failed = [(r.check, r.capability) for r in report.failures]
    assert failed == [("invoke.generated_inputs", "un.run")], report.summary()
    row = report.failures[0]
    assert row.detail.startswith("no input satisfies this schema"), row.detail
    assert "/text" in row.detail and row.path == "request_schemas.in"
    # the other invoke rules could not be looked at, and say why
    skipped = [r for r in report if r.status == "skipped" and r.check.startswith("invoke.")]
    assert skipped and all("no input satisfies" in r.detail for r in skipped)


def test_a_pattern_the_generator_cannot_follow_is_a_warning(tmp_path: Path) -> None:
    """RE2's POSIX class is accepted by the host but means something else to Python's ``re``:
    no generated value matches, so the check says it could not generate, and goes on."""
    folder = trial(tmp_path / "px", text={"type": "string", "pattern": "^[[:alpha:]]+$"})
    report = mnb.check_module(folder, examples=2, boundaries=0)
    assert report.ok, report.summary()
    warned = rows(report, "invoke.generated_inputs")
    assert [r.status for r in warned] == ["warn"], report.summary()
    assert warned[0].detail.startswith("could not generate inputs for px.run's request_schema")


def test_the_check_command_exits_4_when_the_checker_itself_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Internal: a bug in the checker exited 1, the status of "a check failed". It is 4 now,
    with the traceback and what to do; the fault is planted, since none is known."""
    from murmur_nb._checker import cli  # private: the command's own reference to the checker

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("planted")

    monkeypatch.setattr(cli, "check_module", broken)
    assert main(["check", str(trial(tmp_path / "ok"))]) == 4
    err = capsys.readouterr().err
    assert "RuntimeError: planted" in err and "a bug in murmur-nb" in err


# -- 2. misspelt descriptor keys ------------------------------------------------------------


def _rename(where: Callable[[dict[str, Any]], dict[str, Any]], old: str, new: str
            ) -> Callable[[dict[str, Any]], None]:  # fmt: skip
    def change(desc: dict[str, Any]) -> None:
        part = where(desc)
        part[new] = part.pop(old)

    return change


def test_a_misspelt_capabilities_key_is_named_and_nothing_invoked_is_warned(
    tmp_path: Path,
) -> None:
    """It passed "over 0 capabilities", exit status 0, saying nothing."""
    folder = trial(tmp_path / "cs", change=_rename(lambda d: d, "capabilities", "capabilites"))
    report = mnb.check_module(folder, examples=1)
    warned = {r.check: r for r in report.warnings}
    assert set(warned) == {"descriptor.unknown_keys", "invoke.coverage"}, report.summary()
    keys = warned["descriptor.unknown_keys"]
    assert "'capabilites'" in keys.detail and "did you mean 'capabilities'?" in keys.detail
    assert keys.path == "capabilites"
    assert "declares no capabilities" in warned["invoke.coverage"].detail


def test_a_misspelt_effects_key_is_named_and_the_skip_says_nothing_ran(tmp_path: Path) -> None:
    """``cost_know``: cost_known defaulted to false, the capability needed approval and was
    skipped, and the check passed."""
    folder = trial(tmp_path / "ck", change=_rename(
        lambda d: d["capabilities"][0]["effects"], "cost_known", "cost_know"))  # fmt: skip
    report = mnb.check_module(folder, examples=1)
    keys = rows(report, "descriptor.unknown_keys")
    assert [r.status for r in keys] == ["warn"]
    assert keys[0].path == "capabilities[0].effects.cost_know"
    assert "did you mean 'cost_known'?" in keys[0].detail
    coverage = rows(report, "invoke.coverage")
    assert [r.status for r in coverage] == ["warn"]
    assert "no capability was invoked" in coverage[0].detail
    approval = rows(report, "invoke.approval")
    assert approval and "--approve ck.run" in approval[0].detail  # the command's words too


def test_a_misspelt_required_key_fails_naming_the_key_it_meant(tmp_path: Path) -> None:
    folder = trial(tmp_path / "rs", change=_rename(
        lambda d: d["capabilities"][0], "request_schema", "request_shema"))  # fmt: skip
    report = mnb.check_module(folder, examples=1)
    failed = [(r.check, r.path) for r in report.failures]
    assert failed == [("descriptor.schema_ids", "capabilities[0].request_schema")]
    assert "'request_shema'" in report.failures[0].detail  # the refusal names the typo
    keys = rows(report, "descriptor.unknown_keys")
    assert [r.status for r in keys] == ["warn"]
    assert "did you mean 'request_schema'?" in keys[0].detail


def test_an_extra_key_without_a_close_field_is_a_plain_warning(tmp_path: Path) -> None:
    def extra(desc: dict[str, Any]) -> None:
        desc["x_vendor"] = {"any": 1}

    report = mnb.check_module(trial(tmp_path / "xv", change=extra), examples=1)
    assert report.ok, report.summary()
    keys = rows(report, "descriptor.unknown_keys")
    assert [r.status for r in keys] == ["warn"]
    assert "'x_vendor'" in keys[0].detail and "did you mean" not in keys[0].detail


def test_a_correct_descriptor_passes_the_key_and_coverage_checks(tmp_path: Path) -> None:
    report = mnb.check_module(trial(tmp_path / "fine"), examples=1)
    assert report.ok and not report.warnings, report.summary()
    assert [r.status for r in rows(report, "descriptor.unknown_keys")] == ["pass"]
    assert [r.status for r in rows(report, "invoke.coverage")] == ["pass"]


# -- 3. reproductions of a folder outside any home -------------------------------------------


def test_the_reproduction_of_a_development_folder_works_after_the_check(tmp_path: Path) -> None:
    """``murmur-nb invoke dg.run ...`` looked in the default home (module_not_found); the
    python form named an undefined ``HOME``."""
    folder = trial(tmp_path / "dev" / "dg", bad_digest=True, accept_anything=True)
    report = mnb.check_module(folder, examples=1, boundaries=1)
    failed = rows(report, "invoke.artifacts_verify")
    assert failed and failed[0].status == "fail", report.summary()
    again = run_reproduction(failed[0].reproduce, tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["rejected_artifacts"][0]["code"] == "digest_mismatch"
    # an input the schema refuses, sent anyway: the same command with --no-validate (it was
    # a python -c line of some 400 characters)
    refused = [r for r in rows(report, "invoke.invalid_input") if r.reproduce]
    assert refused, report.summary()
    argv = shlex.split(refused[0].reproduce)
    assert argv[:2] == ["murmur-nb", "--module-dir"] and argv[-1] == "--no-validate"
    assert json.loads(argv[-2]) == refused[0].input
    sent = run_reproduction(refused[0].reproduce, tmp_path)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert json.loads(sent.stdout)["capability"] == "dg.run"


def test_the_command_runs_a_module_folder_outside_any_home(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = trial(tmp_path / "dev" / "md")
    assert main(["--module-dir", str(folder), "invoke", "md.run", '{"text": "hi"}']) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["result"] == {"n": 2}
    assert main(["--module-dir", str(folder), "describe", "md"]) == 0
    assert json.loads(capsys.readouterr().out)["module"] == "md"
    assert main(["--module-dir", str(tmp_path / "nothere"), "describe", "md"]) == 2
    assert "--module-dir" in capsys.readouterr().err


# -- 7. a refused describe ------------------------------------------------------------------


def test_a_refused_describe_shows_the_rules_that_held_as_passed(tmp_path: Path) -> None:
    def v2(desc: dict[str, Any]) -> None:
        desc["protocol_versions"] = ["modproto.v2"]

    report = mnb.check_module(trial(tmp_path / "v2", change=v2), examples=1)
    status = {r.check: r.status for r in report}
    assert status["descriptor.protocol_versions"] == "fail"
    held = ["describe.runs", "describe.envelope", "describe.shape", "descriptor.capability_ids",
            "descriptor.schema_ids", "descriptor.schemas_valid", "descriptor.requirements"]
    assert {c: status[c] for c in held} == dict.fromkeys(held, "pass"), report.summary()


def test_a_describe_with_no_descriptor_still_skips_what_it_could_not_check(
    tmp_path: Path,
) -> None:
    folder = trial(tmp_path / "nd")
    (folder / "descriptor.json").write_text('"not an object"')
    report = mnb.check_module(folder, examples=1)
    status = {r.check: r.status for r in report}
    assert "fail" in status.values()
    assert status["descriptor.capability_ids"] == "skipped", report.summary()


# -- 9. pytest node ids ---------------------------------------------------------------------


def test_a_failed_check_id_runs_again_and_last_failed_works(pytester: pytest.Pytester) -> None:
    trial(pytester.path / "wd", bad_digest=True)
    quick = ["--modproto", "wd", "--noconftest", "--modproto-examples", "1",
             "--modproto-boundaries", "1"]  # fmt: skip
    first = pytester.runpytest(*quick, "-p", "cacheprovider")
    first.assert_outcomes(failed=1, passed=first.parseoutcomes()["passed"])
    line = next(x for x in first.stdout.lines if x.startswith("FAILED "))
    node_id = line.removeprefix("FAILED ").split(" - ")[0]
    assert node_id.startswith("wd/module::invoke.artifacts_verify["), node_id
    again = pytester.runpytest(*quick, node_id)
    again.assert_outcomes(failed=1)
    last = pytester.runpytest(*quick, "--lf")
    last.assert_outcomes(failed=1)  # only the failure ran (the others are not collected)
    last.stdout.fnmatch_lines(["*rerun previous 1 failure*"])


def test_pytest_modproto_on_a_missing_folder_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--modproto", "nothere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "ERROR: --modproto nothere: " in err and "neither a module folder" in err
    assert "Traceback" not in err + result.stdout.str()
    assert "_pytest_plugin" not in err + result.stdout.str()


# -- 10. the budget and refused inputs -----------------------------------------------------


@pytest.mark.timeout(120)
def test_refused_inputs_the_budget_left_out_are_a_skipped_row(tmp_path: Path) -> None:
    folder = trial(tmp_path / "sl", sleep=1.2)
    report = mnb.check_module(folder, examples=4, budget=1.5)
    invalid = rows(report, "invoke.invalid_input")
    assert [r.status for r in invalid] == ["skipped"], report.summary()
    assert "refused inputs not sent" in invalid[0].detail
    assert "the 1.5 s budget was spent" in invalid[0].detail


# -- 14. to_json is JSON text ----------------------------------------------------------------


def test_to_json_is_text_and_to_dict_the_data(tmp_path: Path) -> None:
    report = mnb.check_module(trial(tmp_path / "js"), examples=1)
    text = report.to_json()
    assert isinstance(text, str) and json.loads(text) == report.to_dict()
    assert report.to_dict()["module"] == "js"
    hook = mnb.HookCheckReport(component=Path("summarize.wasm"))
    assert isinstance(hook.to_json(), str)
    assert json.loads(hook.to_json()) == hook.to_dict()


# -- 15. presentation and media type ---------------------------------------------------------


def test_a_presentation_the_media_type_cannot_honour_is_a_warning(tmp_path: Path) -> None:
    folder = trial(tmp_path / "pv", presentation="image")
    report = mnb.check_module(folder, examples=1)
    assert report.ok
    warned = rows(report, "invoke.presentation")
    assert [r.status for r in warned] == ["warn"], report.summary()
    assert "'image' cannot be honoured for media type text/plain" in warned[0].detail


# -- 16. the command line ------------------------------------------------------------------


def test_a_closed_pipe_ends_the_check_quietly(tmp_path: Path) -> None:
    """``murmur-nb check ... | head -1`` printed a BrokenPipeError traceback."""
    folder = trial(tmp_path / "bp")
    for extra in ([], ["--json"]):
        with subprocess.Popen(
            [sys.executable, "-m", "murmur_nb", "check", "--examples", "1", *extra, str(folder)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ) as proc:  # fmt: skip
            assert proc.stdout is not None
            proc.stdout.close()  # nobody reads: the first write finds the pipe closed
            _, err = proc.communicate(timeout=300)
        assert "Traceback" not in err and "BrokenPipeError" not in err, err
        assert proc.returncode == 0, err


def test_global_options_after_the_subcommand_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "h"
    trial(home / "modules" / "okmod")
    assert main(["check", "--home", str(home), "--examples", "1", "okmod"]) == 0
    assert capsys.readouterr().out.startswith("PASS okmod")
    out = tmp_path / "out"
    out.mkdir()
    status = main(["invoke", "okmod.run", '{"text": "a"}', "--home", str(home), "--root",
                   f"out={out}"])  # fmt: skip
    assert status == 0 and (out / "note.txt").read_text() == "a"


def test_a_module_not_found_names_the_home_searched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "h"
    (home / "modules").mkdir(parents=True)
    assert main(["--home", str(home), "check", "nothere"]) == 2
    err = capsys.readouterr().err
    assert str(home) in err and "nothere" in err


def test_the_command_speaks_of_commands_not_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "h"

    def v2(desc: dict[str, Any]) -> None:
        desc["protocol_versions"] = ["modproto.v2"]

    trial(home / "modules" / "old", change=v2)
    assert main(["--home", str(home), "describe", "old"]) == 1
    message = json.loads(capsys.readouterr().out)["host_error"]["message"]
    assert "host.modules()" not in message and "murmur-nb list" in message
    assert main(["--home", str(home), "invoke", "old", "{}"]) == 3  # a module id, no capability
    message = json.loads(capsys.readouterr().out)["host_error"]["message"]
    assert "host.describe(" not in message and "`murmur-nb describe old` lists them" in message


def test_one_capability_is_said_in_the_singular(tmp_path: Path) -> None:
    report = mnb.check_module(trial(tmp_path / "one"), examples=1)
    assert "over 1 capability;" in report.headline(), report.headline()


def test_the_check_command_names_the_approve_option(tmp_path: Path) -> None:
    def paid(desc: dict[str, Any]) -> None:
        desc["capabilities"][0]["effects"]["cost_known"] = False

    folder = trial(tmp_path / "pd", change=paid)
    done = command("check", "--examples", "1", str(folder))
    assert done.returncode == 0, done.stderr
    assert "--approve pd.run" in " ".join(done.stdout.split())


# -- 19. a descriptor of thousands of capabilities (a red-team review) ----------------------


def _many(count: int, **effects: Any) -> Callable[[dict[str, Any]], None]:
    """A change giving the trial module ``count`` capabilities of the same schemas."""

    def change(desc: dict[str, Any]) -> None:
        cap = desc["capabilities"][0]
        desc["capabilities"] = [
            {**cap, "id": f"{desc['module']}.c{i}", "effects": {**cap["effects"], **effects}}
            for i in range(count)
        ]

    return change


def test_thousands_of_capabilities_are_checked_in_time_linear_in_them(tmp_path: Path) -> None:
    """Every capability needing approval ran ``describe`` again, and the coverage row and the
    poll rule looked at every capability for each one: 40,000 skipped capabilities took
    245 s, 200 needing approval 12 s. The check command is given 60 s, so the test ends
    (before: killed at 60 s)."""

    def setup_and_paid(desc: dict[str, Any]) -> None:
        _many(30_000)(desc)
        desc["requirements"] = [{"kind": "binary", "name": "tool", "available": False}]

    unmet = trial(tmp_path / "unmet", change=setup_and_paid)
    paid = trial(tmp_path / "paid", change=_many(1_500, cost_known=False))
    for folder, skipped in ((unmet, "invoke.requirements"), (paid, "invoke.approval")):
        done = subprocess.run([sys.executable, "-m", "murmur_nb", "check", "--json",
                               str(folder)], capture_output=True, text=True, timeout=60,
                              check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        checks = json.loads(done.stdout)["checks"]
        assert sum(c["check"] == skipped for c in checks) == (30_000 if folder is unmet else 1_500)


def test_a_descriptors_megabytes_are_not_repeated_in_every_capabilitys_row(
    tmp_path: Path,
) -> None:
    """A requirement's ``detail`` and a paid provider's name were said whole in each
    capability's skipped row: 1,000 capabilities and a 1 MB detail made 1 GB of report (5 GB
    of the kernel, its text 413 s). Each is cut to a label, and at most ten are listed."""

    def unmet(desc: dict[str, Any]) -> None:
        _many(300)(desc)
        desc["requirements"] = [
            {"kind": "binary", "name": f"tool{i}", "available": False, "detail": "d" * 200_000}
            for i in range(41)
        ]

    def paid(desc: dict[str, Any]) -> None:
        _many(300, cost_known=False)(desc)
        desc["permissions"]["paid_providers"] = ["p" * 200_000]

    said: dict[str, str] = {}
    for name, change, check in (("un", unmet, "invoke.requirements"),
                                ("pp", paid, "invoke.approval")):  # fmt: skip
        report = mnb.check_module(trial(tmp_path / name, change=change), examples=1)
        skipped = rows(report, check)
        assert len(skipped) == 300
        assert all(len(r.detail) < 3_000 for r in skipped), len(skipped[0].detail)
        for view in (report._repr_html_(), str(report), report.to_json()):
            assert len(view) < 2_000_000, len(view)
        said[name] = skipped[0].detail
    assert "tool0: dddd" in said["un"]
    assert "and 31 more (the descriptor's requirements)" in said["un"]
    assert "declares paid providers: pppp" in said["pp"]
