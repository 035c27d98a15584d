"""The checker's report reads like a test report, the same in every view.

One real module with three faults and one warning (``tests/modules/threefaults.py``: a
crash at its schema's maximum, a result that breaks its schema, a request id in capitals,
an unknown presentation) is checked once; its report is read as terminal text, as
``murmur-nb check --json``, as pytest's failure text and as static HTML (nbconvert, light
and dark). Each must put failures first, then the warning, then the passes in one line, and
show each problem's rule, input (as JSON), what happened, exit status, stderr and fix.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from _modules import install
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

import murmur_nb as mnb

#: The failures of ``threefaults``, worst first then as they ran.
FAILURES = [
    ("invoke.no_envelope", "threefaults.divide"),
    ("invoke.result_schema", "threefaults.greet"),
    ("invoke.request_id", "threefaults.shout"),
]
SECTIONS = ["what happened", "input", "reproduce", "rule", "fix"]
CRASH_SECTIONS = ["what happened", "exit status", "stderr tail", "input", "reproduce", "rule",
                  "fix"]  # fmt: skip


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory.mktemp("src"), "threefaults", "threefaults")


@pytest.fixture(scope="module")
def report(faulty: Path) -> mnb.CheckReport:
    return mnb.check_module(faulty)


def _labels(block: str) -> list[str]:
    """The headline and the section labels of one problem's text (lines indented by 2)."""
    return [line.strip().split(":")[0] for line in block.splitlines() if line[2] != " "]


def test_the_text_puts_failures_then_warnings_then_one_line_of_passes(
    report: mnb.CheckReport,
) -> None:
    text = report.summary(width=80)
    blocks = text.split("\n\n")
    assert blocks[0].startswith("FAIL threefaults (")
    heads = [b.splitlines()[0] for b in blocks[1:]]
    assert [h.split()[0] for h in heads] == ["FAIL"] * 3 + ["WARN", "SKIPPED", "PASS"]
    assert [tuple(h.split()[1:3]) for h in heads[:3]] == [
        (check, f"[{cap}") for check, cap in FAILURES
    ]
    assert "presentation" in heads[3] and "hologram" in blocks[4]
    assert len(blocks[-1].splitlines()) == 1 and re.match(r"PASS \d+ checks passed", blocks[-1])
    crash = blocks[1]
    assert _labels(crash)[1:] == CRASH_SECTIONS, crash
    assert "    ZeroDivisionError" in crash and "  exit status: 1" in crash
    assert '    {\n      "n": 10\n    }' in crash  # the input, pretty
    assert [_labels(b)[1:] for b in blocks[2:4]] == [SECTIONS, SECTIONS]
    for line in text.splitlines():  # wrapped, but for the stderr and one-line reproductions
        assert len(line) <= 80 or line.startswith(("    murmur-nb ", "      ")), line


def test_json_keeps_the_order_and_inputs_are_json_values(faulty: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "murmur_nb._checker.cli", "check", "--json", str(faulty)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    checks = json.loads(run.stdout)["checks"]
    statuses = [c["status"] for c in checks]
    assert statuses == sorted(statuses, key=["fail", "warn", "skipped", "pass"].index)
    fails = [c for c in checks if c["status"] == "fail"]
    assert [(c["check"], c["capability"]) for c in fails] == FAILURES
    for row in fails:
        assert isinstance(row["input"], dict)  # a JSON value, not a repr in a string
        assert json.loads(shlex.split(row["reproduce"])[-1]) == row["input"]
    assert fails[0]["input"] == {"n": 10} and fails[0]["returncode"] == 1
    assert "ZeroDivisionError" in fails[0]["stderr"]
    assert not any("{'" in str(c["detail"]) for c in checks)


def test_pytest_failure_text_has_the_same_order_and_sections(
    faulty: Path, pytester: pytest.Pytester
) -> None:
    result = pytester.runpytest("--modproto", str(faulty), "-p", "no:randomly")
    assert result.ret == 1
    assert result.parseoutcomes()["failed"] == 3
    out = result.stdout.str()
    heads = [out.index(f"FAIL {check} [{cap}") for check, cap in FAILURES]
    assert heads == sorted(heads), out
    crash = out[heads[0]:heads[1]]
    positions = [crash.index(f"  {label}:") for label in CRASH_SECTIONS]
    assert positions == sorted(positions), crash
    assert "  exit status: 1" in crash and "ZeroDivisionError" in crash
    assert '      "n": 10' in crash


def _static_page(report: mnb.CheckReport, theme: str) -> BeautifulSoup:
    """The report saved in a notebook and exported by nbconvert, as a reader gets it."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("mnb.check_module('threefaults')")
    cell.outputs = [nbformat.v4.new_output(
        "display_data", data={"text/html": report._repr_html_(), "text/plain": str(report)}
    )]  # fmt: skip
    nb.cells = [cell]
    body, _ = HTMLExporter(theme=theme).from_notebook_node(nb)
    return BeautifulSoup(body, "html.parser")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_static_html_is_a_stack_of_cards_failures_first(
    report: mnb.CheckReport, theme: str
) -> None:
    page = _static_page(report, theme)
    (root,) = page.select("div.murmur-check")
    assert root.find("table") is None
    items = root.select("div.murmur-check-item")
    assert [(i["data-status"], i["data-check"]) for i in items] == [
        *(("fail", check) for check, _ in FAILURES), ("warn", "invoke.presentation")
    ]
    labels = [[d.get_text() for d in i.select(".murmur-check-label")] for i in items]
    assert labels[:3] == [CRASH_SECTIONS, SECTIONS, SECTIONS]
    assert labels[3] == ["what happened", "rule", "fix"]
    assert json.loads(items[0].select_one("pre.murmur-check-input").get_text()) == {"n": 10}
    passes = root.select_one("details.murmur-check-passes")
    assert passes is not None and "open" not in passes.attrs
    assert re.match(r"PASS \d+ checks passed", passes.summary.get_text())
    assert root.select_one(".murmur-check-skipped") is not None
    styles = " ".join(str(t.get("style", "")) for t in root.find_all(True))
    assert "overflow-wrap:anywhere" in styles and "max-width:100%" in styles
    assert not re.search(r"(?<![-\w])(?:min-)?width:\s*\d+px", styles)  # no fixed width
    assert not re.search(r"(?<![-\w])(?:background|color):\s*#", styles)  # theme colours only
    # the page defines every theme variable the report's colours name
    css = " ".join(s.get_text() for s in page.find_all("style"))
    for var in set(re.findall(r"var\((--jp-[\w-]+)", styles)):
        assert f"{var}:" in css.replace(f"{var} :", f"{var}:"), (theme, var)
