"""The ``murmur-nb`` command from a platform engineer's trial: what it is given is taken as
it was meant or refused in one line, and what it answers is what it says.

* ``--grant publish=maybe`` was taken as false: a value that is no boolean spelling is a
  usage error (exit 2);
* a policy file's ``approved: probe.push`` (one name, not a list) was split into characters,
  so the approval never applied; ``network: host`` with ``--grant network=...`` likewise;
* on a shared, read-only module home the command's runs folder ``<home>/runs`` could not be
  made, and every command ended in a ``PermissionError`` traceback;
* ``--home /nonexistent list`` printed ``[]`` with exit 0, and ``list`` exited 0 when every
  module was refused; module warnings were not listed;
* a home that is a file, or a policy file's ``roots: /data``, ended in a traceback;
* ``--deadline-ms 0`` was a host refusal (exit 3) in Python's words, an input given twice
  used the file silently, and a missing root's fix named ``Policy(roots=...)``;
* the exit statuses were only in the module's docstring, not in ``--help``;
* ``--help`` named option values by internal destinations (``--home LATE_HOME``).

Every test runs the installed command (``python -m murmur_nb``) in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _modules import default_descriptor, install, write_descriptor
from _users import run_as_test_user

FACET_MODULES = [("good",)]  # installed into the facet_home fixture


def command(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``murmur-nb ARGV`` (as ``python -m murmur_nb``), in a subprocess."""
    return subprocess.run([sys.executable, "-m", "murmur_nb", *argv], capture_output=True,
                          text=True, timeout=300, check=False, **kwargs)  # fmt: skip


def one_line_usage_error(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a usage error says on standard error (exit 2, nothing on stdout)."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stdout == "", done.stderr
    assert done.stderr.startswith("murmur-nb") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr.strip()


@pytest.fixture
def out_root(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


# -- 3. --grant publish= ---------------------------------------------------------------------


def test_a_publish_grant_that_is_no_boolean_is_a_usage_error(facet_home: Path) -> None:
    said = one_line_usage_error(command("--home", str(facet_home), "--grant", "publish=maybe",
                                        "list"))  # fmt: skip
    assert "--grant publish=maybe" in said and "true or false" in said, said


@pytest.mark.parametrize(("spelling", "granted"), [("yes", True), ("TRUE", True), ("1", True),
                                                   ("off", False), ("No", False)])  # fmt: skip
def test_a_publish_grant_takes_each_boolean_spelling(
    facet_home: Path, spelling: str, granted: bool
) -> None:
    desc = default_descriptor(facet_home, "good")
    desc["permissions"]["publish"] = True
    write_descriptor(facet_home / "modules" / "good", desc)
    done = command("--home", str(facet_home), "--grant", f"publish={spelling}", "invoke",
                   "good.echo", '{"count": 1}', "--approve")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["result"]["request"]["grants"]["publish"] is granted


# -- 4. a policy file's one name -------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_policy_file_approving_one_capability_by_name_approves_it(
    facet_home: Path, tmp_path: Path, out_root: Path, suffix: str
) -> None:
    """``approved: good.paid`` was read as the characters of ``good.paid``."""
    policy = tmp_path / f"policy{suffix}"
    policy.write_text("approved: good.paid\n" if suffix == ".yaml"
                      else json.dumps({"approved": "good.paid"}))  # fmt: skip
    done = command("--home", str(facet_home), "--policy", str(policy), "--root",
                   f"out={out_root}", "invoke", "good.paid")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    inv = json.loads(done.stdout)
    assert inv["ok"] and inv["approval"].startswith("approved (allow-list"), inv["approval"]
    assert (out_root / "ran-paid").read_text() == inv["request_id"]  # it really ran


def test_a_policy_files_one_host_and_a_granted_one_are_both_allowed(
    facet_home: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("network: api.example\n")
    done = command("--home", str(facet_home), "--policy", str(policy), "--grant",
                   "network=other.example", "invoke", "good.echo", '{"count": 1}')  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    granted = json.loads(done.stdout)["result"]["request"]["grants"]["network"]
    assert granted == ["api.example", "other.example"]


# -- 5. a shared, read-only module home ------------------------------------------------------


@pytest.fixture
def shared_home() -> Iterator[Path]:
    """A module home root owns and others may only read, in a folder every account may pass
    through (``tmp_path`` is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="mnb-shared-cli-"))
    folder.chmod(0o755)
    install(folder / "F", "good")
    yield folder / "F"
    shutil.rmtree(folder, ignore_errors=True)


def as_test_user(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``murmur-nb --home HOME ARGV`` run by the unprivileged test account (its own cache
    and working folder, beside the home)."""
    return run_as_test_user([sys.executable, "-m", "murmur_nb", "--home", str(home), *argv],
                            home.parent / "user")  # fmt: skip


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own a home another account uses")
def test_a_read_only_shared_home_runs_for_a_user_in_a_private_runs_folder(
    shared_home: Path,
) -> None:
    """Each command ended in ``PermissionError: '<home>/runs'``."""
    listed = as_test_user(shared_home, "list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert [m["id"] for m in json.loads(listed.stdout) if m["ok"]] == ["good"]
    done = as_test_user(shared_home, "invoke", "good.make", "{}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    inv = json.loads(done.stdout)
    assert inv["ok"] and inv["result"] == {"made": 1}
    # said once, in one line: where the files went, and how to keep them
    (note,) = [line for line in done.stderr.splitlines() if "runs" in line]
    assert str(shared_home / "runs") in note and "--runs-dir" in note, note
    assert not (shared_home / "runs").exists()  # nothing was made in the shared home
    assert not Path(inv["artifacts"][0]["file"]).exists()  # the private folder went with it


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own a home another account uses")
def test_a_user_keeps_the_files_of_a_shared_home_call_with_runs_dir(shared_home: Path) -> None:
    runs = shared_home.parent / "user" / "runs"
    done = as_test_user(shared_home, "invoke", "good.make", "{}", "--runs-dir", str(runs))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""  # the folder was named: nothing to say
    file = Path(json.loads(done.stdout)["artifacts"][0]["file"])
    assert file.is_relative_to(runs.resolve()) and file.read_bytes() == b"png!"


def test_a_writable_home_keeps_its_runs_folder_after_the_command(facet_home: Path) -> None:
    """``<home>/runs`` stays the default where it can be written (``--help`` says so): the
    file the JSON names is there after the command."""
    done = command("--home", str(facet_home), "invoke", "good.make", "{}")
    assert done.returncode == 0 and done.stderr == "", done.stdout + done.stderr
    file = Path(json.loads(done.stdout)["artifacts"][0]["file"])
    assert file.is_relative_to((facet_home / "runs").resolve()) and file.read_bytes() == b"png!"


# -- 9. list: where it looked, and what it found ---------------------------------------------


@pytest.mark.parametrize("made", ["nothing", "home"])
def test_list_without_a_modules_folder_says_where_it_looked(tmp_path: Path, made: str) -> None:
    home = tmp_path / "nothere"
    if made == "home":
        home.mkdir()
    said = one_line_usage_error(command("--home", str(home), "list"))
    assert f"no modules folder {home / 'modules'}" in said, said
    assert "--home" in said and "$FACET_STUDIO_HOME" in said, said


def test_list_of_an_empty_home_is_an_empty_list_with_a_note(tmp_path: Path) -> None:
    modules = tmp_path / "h" / "modules"
    modules.mkdir(parents=True)
    done = command("--home", str(tmp_path / "h"), "list")
    assert done.returncode == 0 and json.loads(done.stdout) == []
    assert done.stderr.strip() == f"murmur-nb list: no module in {modules}", done.stderr


def test_list_exits_1_when_every_module_is_refused(facet_home: Path) -> None:
    desc = default_descriptor(facet_home, "good")
    desc["protocol_versions"] = ["modproto.v2"]
    write_descriptor(facet_home / "modules" / "good", desc)
    done = command("--home", str(facet_home), "list")
    assert done.returncode == 1, done.stdout + done.stderr
    (row,) = json.loads(done.stdout)
    assert not row["ok"] and row["errors"][0]["path"] == "protocol_versions"
    modules = facet_home / "modules"
    assert done.stderr.strip() == (
        f"murmur-nb list: every module in {modules} was refused; their errors are listed"
    ), done.stderr


def test_list_shows_a_modules_warnings(tmp_path: Path) -> None:
    """A capability another module's id takes could never be invoked; ``list`` said nothing."""
    home = tmp_path / "h"
    install(home, "a")
    desc = default_descriptor(home, "a")
    desc["capabilities"][0]["id"] = "a.b.echo"
    write_descriptor(home / "modules" / "a", desc)
    install(home, "a.b")
    done = command("--home", str(home), "list")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["id"]: row for row in json.loads(done.stdout)}
    assert rows["a.b"]["warnings"] == []
    (warning,) = rows["a"]["warnings"]
    assert warning["path"] == "capabilities[0].id"
    assert "'a.b.echo' cannot be invoked" in warning["detail"], warning


# -- 10. one-line errors, never a traceback ----------------------------------------------------


@pytest.mark.parametrize("subcommand", [["list"], ["describe", "good"],
                                        ["invoke", "good.echo", '{"count": 1}']])  # fmt: skip
def test_a_home_that_is_a_file_is_a_usage_error(tmp_path: Path, subcommand: list[str]) -> None:
    home = tmp_path / "passwd"
    home.write_text("root:x:0:0::/root:/bin/sh\n")
    said = one_line_usage_error(command("--home", str(home), *subcommand))
    assert f"--home {home} is a file, not a facet-studio home" in said, said


def test_a_home_from_the_environment_that_is_a_file_is_not_called_home_option(
    tmp_path: Path,
) -> None:
    home = tmp_path / "passwd"
    home.write_text("root:x:0:0::/root:/bin/sh\n")
    done = command("list", env={**os.environ, "FACET_STUDIO_HOME": str(home)})
    said = one_line_usage_error(done)
    assert said.startswith(f"murmur-nb: the home {home} is a file"), said


@pytest.mark.parametrize(("text", "wanted"), [
    ("roots: /data\n", "Policy.roots must map names to paths"),
    ("binaries: /usr/bin/tool\n", "Policy.binaries must map names to paths"),
    ("roots: [data]\n", "Policy.roots must map names to paths"),
])  # fmt: skip
def test_a_policy_file_with_a_value_of_the_wrong_shape_is_a_usage_error(
    facet_home: Path, tmp_path: Path, text: str, wanted: str
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    said = one_line_usage_error(command("--home", str(facet_home), "--policy", str(policy),
                                        "--root", "out=/tmp", "list"))  # fmt: skip
    assert said.startswith(f"murmur-nb: --policy {policy}: {wanted}"), said


# -- 14. the command's words and statuses ------------------------------------------------------


@pytest.mark.parametrize(("flag", "value"), [("--deadline-ms", "0"), ("--deadline-ms", "-5"),
                                             ("--max-output-bytes", "0"),
                                             ("--deadline-ms", str(10**12))])  # fmt: skip
def test_a_bound_out_of_range_is_a_usage_error_in_the_commands_words(
    facet_home: Path, flag: str, value: str
) -> None:
    said = one_line_usage_error(command("--home", str(facet_home), "invoke", "good.echo",
                                        '{"count": 1}', flag, value))  # fmt: skip
    assert f"{flag} {value}" in said and "deadline_ms=" not in said, said
    assert "max_output_bytes=" not in said and "to invoke" not in said, said


def test_an_input_given_twice_is_a_usage_error(facet_home: Path, tmp_path: Path) -> None:
    given = tmp_path / "input.json"
    given.write_text('{"count": 1}')
    said = one_line_usage_error(command("--home", str(facet_home), "invoke", "good.echo",
                                        '{"count": 2}', "--input-file", str(given)))  # fmt: skip
    assert "--input-file" in said and "not both" in said, said


def test_a_missing_root_names_the_option_that_maps_it(facet_home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nothere"
    done = command("--home", str(facet_home), "--root", f"src={missing}", "invoke",
                   "good.echo", '{"count": 1}')  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    error = json.loads(done.stdout)["host_error"]
    assert error["code"] == "root_unavailable"
    assert "Policy(roots=" not in error["message"], error["message"]
    assert "--root src=DIR" in error["message"] and "roots:" in error["message"], error


# -- 17. the exit statuses in --help -----------------------------------------------------------

#: The statuses each command may end with.
STATUSES = {
    (): {"0", "1", "2", "3", "4", "130"},
    ("list",): {"0", "1", "2", "3", "130"},
    ("describe",): {"0", "1", "2", "3", "130"},
    ("invoke",): {"0", "1", "2", "3", "130"},
    ("check",): {"0", "1", "2", "3", "4", "130"},
    ("check-hook",): {"0", "1", "2", "130"},
}


@pytest.mark.parametrize("subcommand", sorted(STATUSES))
def test_help_lists_the_exit_statuses(subcommand: tuple[str, ...]) -> None:
    done = command(*subcommand, "--help")
    assert done.returncode == 0, done.stderr
    assert "exit status:" in done.stdout, done.stdout
    section = done.stdout.split("exit status:", 1)[1]
    codes = set(re.findall(r"^ {2}(\d+) ", section, re.M))
    assert codes == STATUSES[subcommand], section


# -- newcomer trial: --help named its options by their internal destinations -------------------

#: What each option's value is called in --help (argparse's default is the destination's name
#: in capitals, which for the options a subcommand repeats was ``LATE_HOME``).
METAVARS = {
    "--home": "DIR", "--module-dir": "DIR", "--store": "DIR", "--runs-dir": "DIR",
    "--policy": "FILE", "--root": "NAME=PATH", "--grant": "KIND=NAME",
    "--binary": "NAME=PATH", "--allow": "CAPABILITY",
}  # fmt: skip


@pytest.mark.parametrize("subcommand", sorted(STATUSES))
def test_help_names_option_values_by_what_they_are(subcommand: tuple[str, ...]) -> None:
    """The installed console script (``.venv/bin/murmur-nb``), as a newcomer runs it."""
    exe = Path(sys.executable).with_name("murmur-nb")
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "murmur_nb"]
    done = subprocess.run([*argv, *subcommand, "--help"], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = dict(re.findall(r"(--[a-z][a-z-]*) ([A-Z][A-Z_=]*)\b", done.stdout))
    assert not [v for v in shown.values() if v.startswith("LATE")], done.stdout
    for flag, value in shown.items():  # never argparse's default, the name in capitals
        assert value != flag.lstrip("-").replace("-", "_").upper(), (flag, value)
    if subcommand != ("check-hook",):
        assert {f: shown.get(f) for f in METAVARS} == METAVARS, done.stdout
