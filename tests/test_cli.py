"""The ``murmur-nb`` command: list, describe, invoke; JSON on standard output.

Most tests call the command's ``main(argv)`` (internal) in-process, which is what the
console script runs, to keep them fast; ``test_console_script`` runs the installed command.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _modules import default_descriptor, write_descriptor

from murmur_nb._checker.cli import main  # private: the console script's main(argv), run in-process

FACET_MODULES = [("good",), ("broken",)]  # installed into the facet_home fixture


@pytest.fixture
def facet_home(facet_home: Path) -> Path:
    """The shared facet home, with module ``broken`` speaking only ``modproto.v2``."""
    desc = default_descriptor(facet_home, "broken")
    desc["protocol_versions"] = ["modproto.v2"]
    write_descriptor(facet_home / "modules" / "broken", desc)
    return facet_home


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    status = main(list(argv))
    return status, json.loads(capsys.readouterr().out)


def test_list(facet_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, rows = _run(capsys, "--home", str(facet_home), "list")
    assert status == 0
    by_id = {r["id"]: r for r in rows}
    assert by_id["good"]["ok"] and by_id["good"]["errors"] == []
    paid = next(c for c in by_id["good"]["capabilities"] if c["id"] == "good.paid")
    assert paid["approval_reasons"]
    assert not by_id["broken"]["ok"]
    assert by_id["broken"]["errors"][0]["path"] == "protocol_versions"


def test_describe(facet_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, desc = _run(capsys, "--home", str(facet_home), "describe", "good")
    assert status == 0 and desc["module"] == "good" and desc["protocol_versions"] == ["modproto.v1"]
    status, out = _run(capsys, "--home", str(facet_home), "describe", "broken")
    assert status == 1 and out["host_error"]["code"] == "invalid_descriptor"
    assert out["host_error"]["errors"][0]["path"] == "protocol_versions"


def test_invoke(facet_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_root = tmp_path / "out"
    out_root.mkdir()
    base = ["--home", str(facet_home), "--root", f"out={out_root}", "--grant", "network=*"]
    status, inv = _run(capsys, *base, "invoke", "good.make", "{}")
    assert status == 0 and inv["ok"] and inv["result"] == {"made": 1}
    (art,) = inv["artifacts"]
    assert Path(art["file"]) == (out_root / "a.png").resolve()
    status, inv = _run(capsys, *base, "invoke", "good.echo", '{"count": 2}', "--extra",
                       '{"tool": "x"}', "--deadline-ms", "7000")
    request = inv["result"]["request"]
    assert request["grants"]["network"] == ["api.example", "other.example"]
    assert request["tool"] == "x" and request["deadline_ms"] == 7000
    status, inv = _run(capsys, *base, "invoke", "good.fail", '{"code": "nope"}')
    assert status == 1 and inv["error"]["code"] == "nope"
    status, inv = _run(capsys, *base, "invoke", "good.paid")
    assert status == 3 and inv["host_error"]["code"] == "approval_required"
    assert inv["host_error"]["reasons"] and not (out_root / "ran-paid").exists()
    # the fix it names is the command line's (it named host.approve(...) in Python)
    said = inv["host_error"]["message"]
    assert "--approve" in said and "--allow good.paid" in said and "host.approve" not in said
    status, inv = _run(capsys, *base, "invoke", "good.paid", "--approve")
    assert status == 0 and (out_root / "ran-paid").exists()
    status, inv = _run(capsys, *base, "--allow", "good.paid", "invoke", "good.paid")
    assert status == 0 and inv["approval"].startswith("approved (allow-list")
    status, inv = _run(capsys, *base, "invoke", "good.echo", '{"count": "x"}')
    assert status == 3 and inv["host_error"]["code"] == "invalid_input"


def test_python_dash_m_runs_the_same_command(facet_home: Path) -> None:
    """``python -m murmur_nb`` is ``murmur-nb``, for a venv whose scripts are not on PATH."""
    done = subprocess.run([sys.executable, "-m", "murmur_nb", "--home", str(facet_home), "list"],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert {m["id"] for m in listed} >= {"good"}


def test_usage_errors(facet_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--home", str(facet_home), "invoke", "good.echo", "{not json"]) == 2
    # said once: it read "murmur-nb: murmur-nb: the input is not JSON"
    assert capsys.readouterr().err.startswith("murmur-nb: the input is not JSON: ")
    assert main(["--home", str(facet_home), "--grant", "teleport=x", "list"]) == 2
    assert "KIND=NAME" in capsys.readouterr().err
    assert main(["--home", str(facet_home), "invoke", "good.echo", "--extra", "{bad"]) == 2
    assert capsys.readouterr().err.startswith("murmur-nb: --extra is not JSON: ")
    assert main(["--home", str(facet_home), "invoke", "good.echo", "--extra", "[1]"]) == 2
    assert "--extra must be a JSON object" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--policy", "--input-file"])
def test_a_file_that_cannot_be_read_is_a_usage_error(
    facet_home: Path, tmp_path: Path, flag: str
) -> None:
    """A missing ``--policy`` or ``--input-file`` ended in a Python traceback
    (``FileNotFoundError``); it is a one-line usage error, status 2, like a bad ``--grant``."""
    missing = tmp_path / "nothere.json"
    home = ["--home", str(facet_home)]
    if flag == "--policy":
        argv, wanted = [*home, "--policy", str(missing), "list"], "a policy file (.json or .yaml)"
    else:
        argv = [*home, "invoke", "good.echo", "--input-file", str(missing)]
        wanted = "a file holding the input JSON"
    done = subprocess.run([sys.executable, "-m", "murmur_nb", *argv], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"murmur-nb: {flag} {missing}: cannot be read (No such file or directory); give {wanted}"
    )
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_yaml_policy_with_a_key_given_twice_is_refused(
    facet_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """yaml.safe_load kept the last of two equal keys: the first allow-list was lost."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("network: ['api.example']\nnetwork: []\n")
    assert main(["--home", str(facet_home), "--policy", str(policy), "list"]) == 2
    assert "the key 'network' is given twice" in capsys.readouterr().err
    policy.write_text("network: ['api.example']\npublish: yes\n")
    assert main(["--home", str(facet_home), "--policy", str(policy), "list"]) == 0


def test_console_script(facet_home: Path) -> None:
    exe = Path(sys.executable).with_name("murmur-nb")
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "murmur_nb._checker.cli"]
    proc = subprocess.run([*argv, "--home", str(facet_home), "list"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert {r["id"] for r in json.loads(proc.stdout)} == {"good", "broken"}
