"""``pytest --modproto PATH`` and ``pytest --hook PATH`` never import code from the folder they
check.

pytest imports a folder's ``conftest.py`` (and the plugins its ``pytest.ini`` ``addopts``
name) as the user, outside the sandbox, before any check runs. Each test puts a real
``conftest.py`` that writes a marker file into a real module folder (or hook folder), runs the
installed ``pytest`` in a subprocess as a module's reviewer would, and looks for the marker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _modules import install

PYTEST = Path(sys.executable).with_name("pytest")
MARKER_CONFTEST = """\
import os
from pathlib import Path

Path({marker!r}).write_text(f"uid={{os.getuid()}}")
"""
#: the checks cost little: one random example per capability, no boundary inputs
QUICK = ["--modproto-examples", "1", "--modproto-boundaries", "0"]


def run_pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``pytest`` in ``cwd``, without the ``PYTEST_*`` settings of this run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([str(PYTEST), "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip


def planted(folder: Path, marker: Path) -> Path:
    """``folder`` with a ``conftest.py`` that writes ``marker`` when imported."""
    (folder / "conftest.py").write_text(MARKER_CONFTEST.format(marker=str(marker)))
    return folder


@pytest.fixture
def module(tmp_path: Path) -> Path:
    """A real module folder (``tests/modules/checked.py``) with a marker-writing conftest."""
    folder = install(tmp_path / "home", "critic", "checked")
    (folder / "skills").mkdir()
    (folder / "skills" / "howto.md").write_text("# How to greet\n\nSay hello.\n")
    return planted(folder, tmp_path / "marker")


def test_pytest_modproto_in_the_module_folder_refuses_before_importing_its_conftest(
    tmp_path: Path, module: Path
) -> None:
    """The README's old workflow (``cd`` into the module, ``pytest --modproto .``) imported the
    module's conftest.py as the user and still reported every check passed."""
    run = run_pytest(module, "--modproto", ".", *QUICK)
    assert not (tmp_path / "marker").exists(), "pytest imported the module's conftest.py"
    out = run.stdout + run.stderr
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert "passed" not in out
    assert f"pytest --modproto refused: pytest started inside {module}" in out
    assert f"murmur-nb check {module}" in out  # the first advice
    assert f"pytest --modproto {module} --noconftest" in out


def test_a_test_path_or_testpaths_inside_the_module_folder_is_refused(
    tmp_path: Path, module: Path
) -> None:
    """pytest loads the conftests of the test paths it is given (and of ``testpaths``) before
    collection, so a test path inside the checked folder is refused too, from outside it."""
    (module / "tests").mkdir()
    named = run_pytest(module.parent, "critic/tests", "--modproto", "critic", *QUICK)
    assert named.returncode == pytest.ExitCode.USAGE_ERROR, named.stdout + named.stderr
    assert f"conftest.py files of {module / 'tests'}, inside the module folder" in named.stderr
    (module.parent / "pytest.ini").write_text("[pytest]\ntestpaths = critic\n")
    listed = run_pytest(module.parent, "--modproto", "critic", *QUICK)
    assert listed.returncode == pytest.ExitCode.USAGE_ERROR, listed.stdout + listed.stderr
    assert f"pytest would import the conftest.py files of {module}, inside" in listed.stderr
    (module.parent / "pytest.ini").unlink()
    test_named = module.rename(module.parent / "test-critic")  # a test* folder where it starts
    started = run_pytest(test_named.parent, "--modproto", "test-critic", *QUICK)
    assert started.returncode == pytest.ExitCode.USAGE_ERROR, started.stdout + started.stderr
    assert f"the conftest.py files of {test_named}, inside" in started.stderr
    assert not (tmp_path / "marker").exists()


def test_the_advised_commands_from_outside_import_nothing_and_check(
    tmp_path: Path, module: Path
) -> None:
    """What the refusal advises runs the checks and leaves the conftest unimported; a test path
    around the module folder does not reach into it either."""
    outside = module.parent
    for args in (["--modproto", str(module), "--noconftest"], [".", "--modproto", "critic"]):
        run = run_pytest(outside, *args, *QUICK)
        assert run.returncode == 0, run.stdout + run.stderr
        assert " passed" in run.stdout
        assert not (tmp_path / "marker").exists(), args
    checked = subprocess.run([sys.executable, "-m", "murmur_nb._checker.cli", "check",
                              "--examples", "1", str(module)], cwd=module,
                             capture_output=True, text=True, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert not (tmp_path / "marker").exists()
    # nothing was written into the module folder either (hypothesis keeps its caches in
    # .hypothesis of the working folder unless told otherwise)
    assert sorted(p.name for p in module.iterdir()) == ["_proto.py", "conftest.py", "module",
                                                        "skills"]  # fmt: skip


def test_a_conftest_imported_before_the_checker_could_refuse_is_said_plainly(
    tmp_path: Path, module: Path
) -> None:
    """A ``pytest.ini`` in the folder can make pytest import its conftest.py as a plugin
    (``addopts = -p conftest``, ``pythonpath = .``) before any plugin's hook runs: the run
    says so, names the file and fails without a test summary."""
    (module / "pytest.ini").write_text("[pytest]\naddopts = -p conftest\npythonpath = .\n")
    run = run_pytest(module, "--modproto", ".", *QUICK)
    out = run.stdout + run.stderr
    assert (tmp_path / "marker").read_text() == f"uid={os.getuid()}"  # it did run
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert "passed" not in out
    assert (f"conftest.py in {module} was already imported by pytest before the checker "
            "could refuse") in out  # fmt: skip


@pytest.mark.slow
def test_pytest_hook_in_the_hook_folder_refuses_before_importing_its_conftest(
    tmp_path: Path,
) -> None:
    from test_check_hook import capsule

    config = capsule(tmp_path / "capsule")
    hooks = planted(config.parent / "hooks", tmp_path / "marker")
    run = run_pytest(hooks, "--hook", "hook.wasm", "--hook-config", str(config))
    out = run.stdout + run.stderr
    assert not (tmp_path / "marker").exists(), "pytest imported the hook folder's conftest.py"
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert "passed" not in out
    assert f"pytest --hook refused: pytest started inside {hooks}" in out
    assert f"murmur-nb check-hook {hooks / 'hook.wasm'} --config {config}" in out
    advised = f"pytest --hook {hooks / 'hook.wasm'} --hook-config {config} --noconftest"
    assert advised in out
    again = run_pytest(config.parent, *advised.split()[1:])
    assert again.returncode == 0, again.stdout + again.stderr
    assert "7 passed" in again.stdout
    assert not (tmp_path / "marker").exists()
