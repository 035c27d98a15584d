"""A module's failure carries its evidence (issue 24): exit status or signal, stderr tail,
the start of a stdout that was no envelope; in the exception, the audit row, the widgets, an
IPython traceback, and the Invocation's own card.

Every module here is the real executable ``tests/modules/crashy.py``, run in the sandbox.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

import murmur_nb as mnb
from murmur_nb.widgets import CapabilityForm, InvocationView, LiveRun

FACET_MODULES = [("crashy", "crashy"), ("good",)]


@pytest.fixture
def host(facet_home: Path, tmp_path: Path) -> Iterator[mnb.ModuleHost]:
    policy = mnb.Policy(roots={"out": tmp_path}, deadline_ms=20_000)
    with mnb.ModuleHost(home=facet_home, policy=policy, artifact_store=tmp_path / "s") as h:
        yield h


def test_a_module_that_raises_shows_its_exit_status_and_traceback(
    host: mnb.ModuleHost,
) -> None:
    with pytest.raises(mnb.ProtocolViolation) as err:
        host.invoke("crashy.raise", {})
    exc = err.value
    assert exc.rule == "json" and exc.code == "protocol_violation"
    # the message points at the module's own error, not at the envelope
    assert "standard output is empty: the module exited with status 1" in exc.message
    assert "ZeroDivisionError: division by zero" in exc.message
    assert "Fix that error in the module" in exc.message
    evidence = exc.evidence
    assert evidence is exc.invocation.evidence
    assert (evidence.returncode, evidence.signal, evidence.crashed) == (1, "", True)
    assert "Traceback (most recent call last)" in evidence.stderr_tail
    assert "in load_model" in evidence.stderr_tail
    # a terminal escape the module wrote is shown, never obeyed
    assert "\\x1b[2J" in evidence.stderr_tail and "\x1b" not in evidence.stderr_tail
    assert evidence.stdout_head == ""
    text = str(exc)
    assert text.startswith(exc.message) and "exit: exited with status 1" in text
    assert re.search(r"stderr \(last \d+ lines\):", text)
    row = host.audit().iloc[-1]
    assert (row["outcome"], row["exit"]) == ("protocol_violation", "exited with status 1")
    assert "ZeroDivisionError" in row["stderr_tail"] and "exited with status 1" in row["message"]


def test_a_stray_debug_print_shows_what_was_printed(host: mnb.ModuleHost) -> None:
    with pytest.raises(mnb.ProtocolViolation) as err:
        host.invoke("crashy.debug", {})
    exc = err.value
    assert exc.rule == "json" and "not JSON" in exc.message
    assert "it starts with 'DEBUG: request parsed, calling the model'" in exc.message
    assert "print diagnostics" in exc.message and "to stderr" in exc.message
    assert exc.evidence.stdout_head.startswith("DEBUG: request parsed")
    assert '"answer": 42' in exc.evidence.stdout_head  # the envelope that followed
    assert exc.evidence.returncode == 0 and not exc.evidence.crashed
    assert "stdout (start):" in str(exc)


def test_a_module_killed_at_its_deadline_says_what_it_was_doing(host: mnb.ModuleHost) -> None:
    with pytest.raises(mnb.DeadlineExceeded) as err:
        host.invoke("crashy.hang", {}, deadline_ms=1_500)
    exc = err.value
    assert "waiting for the upstream to answer" in exc.message
    assert exc.evidence.signal == "SIGKILL" and exc.evidence.crashed
    assert "was killed by SIGKILL" in str(exc)
    assert host.audit().iloc[-1]["exit"].startswith("was killed by SIGKILL")


def test_a_module_over_its_output_bound_shows_its_stderr_and_output(
    host: mnb.ModuleHost,
) -> None:
    with pytest.raises(mnb.OutputTooLarge) as err:
        host.invoke("crashy.flood", {}, max_output_bytes=64 * 1024)
    exc = err.value
    assert "dumping the whole table to stdout" in exc.message
    assert exc.evidence.stdout_head.startswith("row,row,")
    assert len(exc.evidence.stdout_head) <= 512 + 2  # bounded, with its "…"
    assert exc.evidence.signal == "SIGKILL"


def test_a_module_killed_by_a_signal_is_named(host: mnb.ModuleHost) -> None:
    with pytest.raises(mnb.ProtocolViolation) as err:
        host.invoke("crashy.segv", {})
    exc = err.value
    assert exc.evidence.signal == "SIGSEGV"
    assert "the module was killed by SIGSEGV" in exc.message
    assert "about to touch freed memory" in exc.message


def test_the_stderr_tail_is_bounded(host: mnb.ModuleHost) -> None:
    """``runaway.chatter``-like: the evidence keeps at most 20 lines, 4 KiB, of the tail."""
    with pytest.raises(mnb.ProtocolViolation) as err:
        host.invoke("crashy.raise", {})
    tail = err.value.evidence.stderr_tail
    assert len(tail.splitlines()) <= 20 and len(tail.encode()) <= 4096
    assert tail.splitlines()[-1] == "ZeroDivisionError: division by zero"


def test_an_uncaught_error_in_ipython_shows_the_evidence_not_the_hosts_frames(
    facet_home: Path, tmp_path: Path
) -> None:
    """A real IPython shell runs a cell that lets the error escape; what it prints is the
    error's own short traceback."""
    cell = textwrap.dedent(f"""
        import murmur_nb as mnb
        host = mnb.ModuleHost(home={str(facet_home)!r}, artifact_store={str(tmp_path / "s")!r})
        host.invoke("crashy.raise", {{}})
    """).strip()
    done = subprocess.run(
        [sys.executable, "-m", "IPython", "--colors=NoColor", "--no-banner", "-c", cell],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    shown = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    assert "ProtocolViolation (protocol_violation): module 'crashy' broke" in shown
    assert "exit: exited with status 1" in shown
    assert "ZeroDivisionError: division by zero" in shown and "in load_model" in shown
    assert 'in your cell, line 3: host.invoke("crashy.raise", {})' in shown  # the cell's own line
    assert "_modules/host.py" not in shown and "_modules/envelope.py" not in shown
    assert len(shown.splitlines()) < 40


def test_a_result_that_breaks_its_schema_is_a_warning_state(host: mnb.ModuleHost) -> None:
    inv = host.invoke("crashy.schema", {})
    assert inv.ok and inv.state == "warning"
    assert "result does not match result_schema 'counted'" in inv.result_problem
    card = html.unescape(inv._repr_html_())
    assert 'data-state="warning"' in card and "result breaks its schema" in card
    assert ">ok<" not in card
    assert card.count(inv.result_problem.split(":")[0]) == 1  # said once
    view = InvocationView(inv)
    assert view.status == "warning" and "result breaks its schema" in view.header.value
    row = host.audit().iloc[-1]
    assert row["outcome"] == "ok" and row["message"] == inv.result_problem
    good = host.invoke("good.echo", {"count": 1})
    assert good.state == "ok" and 'data-state="ok"' in good._repr_html_()


def test_a_missing_artifact_has_its_own_code_said_once(host: mnb.ModuleHost) -> None:
    inv = host.invoke("crashy.ghost", {})
    (rejected,) = inv.rejected_artifacts
    assert rejected.code == "artifact_missing" and "does not exist" in rejected.message
    assert not any("ghost" in w for w in inv.warnings)  # not repeated as a warning
    view = InvocationView(inv)
    shown = view.header.value + view.details.value + str(view.rendering.html)
    assert shown.count("does not exist under its root") == 1
    assert inv._repr_html_().count("does not exist under its root") == 1


def test_an_invocation_displays_as_a_card_not_a_dataclass_repr(host: mnb.ModuleHost) -> None:
    from IPython.core.formatters import DisplayFormatter

    inv = host.invoke("good.make", {})
    data, _ = DisplayFormatter().format(inv)
    card, text = data["text/html"], data["text/plain"]
    assert card.startswith('<div class="murmur-invocation-card" data-state="ok"')
    assert "a0 · image/png · 4 B · out:a.png · sha256:" in card
    assert "confinement:" in card
    assert inv.request_id not in card + text  # nothing that changes from run to run
    assert text.splitlines()[0] == "Invocation good.make: ok"
    assert len(text.splitlines()) < 8 and "Request(" not in text
    artifact, _ = DisplayFormatter().format(inv.artifacts[0])
    assert "murmur-artifact-card" in artifact["text/html"]
    assert artifact["text/plain"].startswith("VerifiedArtifact a0 · image/png")


def test_live_run_error_box_shows_the_traceback_tail(host: mnb.ModuleHost) -> None:
    run = LiveRun(host, "crashy.raise", {})
    assert run.wait(60)
    assert run.state == "failed"  # the module ran and crashed: not a refusal
    assert 'class="murmur-error-box"' in run.status.value
    assert "ZeroDivisionError: division by zero" in run.status.value
    assert "exit: exited with status 1" in run.status.value
    assert "ZeroDivisionError: division by zero" in run.text()


def test_cancelling_a_live_run_yourself_is_not_an_error(host: mnb.ModuleHost) -> None:
    run = LiveRun(host, "crashy.hang", {})
    run.cancel()
    assert run.wait(30)
    assert run.state == "cancelled"
    assert "cancelled by you" in run.status.value
    assert "murmur-error-box" not in run.status.value and "murmur-error" not in run.status.value


def test_cancelling_your_own_form_run_is_said_plainly(host: mnb.ModuleHost) -> None:
    """Issue 24: not a red "cancelled: cancelled" after the user's own Cancel."""
    form = CapabilityForm(host, "crashy.hang")
    form.run_button.click()
    assert form.live is not None
    form.live.cancel_button.click()
    form.wait(30)
    assert form.state == "cancelled"
    assert "cancelled by you" in form.status.value
    assert "cancelled: cancelled" not in form.status.value
    assert "murmur-error" not in form.status.value + form.live.status.value


def test_a_small_result_shows_open_a_large_one_folded(host: mnb.ModuleHost) -> None:
    """Issue 40: the card folded even ``{"made": 1}`` behind a click. A result of a few lines
    shows open; a long one (``good.echo`` returns its whole request and environment) folds."""
    small = host.invoke("good.make", {})
    assert small.result == {"made": 1}
    page = BeautifulSoup(small._repr_html_(), "html.parser")
    (shown,) = page.select("details")
    assert shown.has_attr("open") and json.loads(shown.pre.get_text()) == {"made": 1}
    large = host.invoke("good.echo", {"count": 1})
    page = BeautifulSoup(large._repr_html_(), "html.parser")
    (folded,) = page.select("details")
    assert not folded.has_attr("open") and len(folded.pre.get_text().splitlines()) > 12
