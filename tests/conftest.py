"""Fixtures shared by the test files, each named for the kind of home it holds.

Three different folders are called "home" in murmur-nb, so no fixture is called that:

``facet_home``
    A facet-studio module home: real fixture modules from ``tests/modules/`` installed as
    executables under ``<home>/modules/<id>/``. A test file lists the modules it needs in a
    module-level ``FACET_MODULES`` (``(module_id, fixture)`` pairs; fixture ``plain`` when
    only the id is given; just ``good`` when the file lists none). A file that needs the
    modules changed further overrides ``facet_home`` with a fixture that takes it.
``murmur_home``
    A murmur home for conversation records (``<home>/conversations/<context-id>.jsonl``),
    empty: each test writes the records it reads, the way the runtime would.
``demo_home``
    The demo home (demo modules, artifact store, murmur home with the demo record and
    ``murmur.yaml``), prepared once per test file. The demo hook component is built only
    for test files that set ``DEMO_HOOKS = True``, because building it takes a while.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _modules import install
from _users import test_user
from hypothesis import HealthCheck, settings

import murmur_nb as mnb
from murmur_nb._files.scratch import remove_tree  # private: removes read-only snapshot trees

# Property tests on a shared machine: no per-example deadline (hypothesis' 200 ms) and no
# too-slow health check. An example that takes about a millisecond alone can pass 200 ms
# beside the suite's other worker, more so in a rerun at nice 10 (tests/_users.py), where
# test_invoke's envelope property failed once in a run beside two busy loops. Tests that set
# a deadline of their own keep it; the module checker sets its own settings.
settings.register_profile("murmur-nb-suite", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
settings.load_profile("murmur-nb-suite")


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C means KeyboardInterrupt here, however the suite was started; snapshots of
    module folders go to a store of this run.

    A shell starts a background command (``cmd &``, ``nohup``) with SIGINT ignored, and
    Python then never installs its KeyboardInterrupt handler; the tests that press Ctrl-C
    (on a module's process tree, a hook guest, a host function) need it. The snapshot store
    is persistent by design; the suite's own (private, as every store is: a root host gives
    its sandbox uid access) is removed when the run ends.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if "MURMUR_NB_SNAPSHOTS" not in os.environ:
        store = Path(tempfile.mkdtemp(prefix="murmur-nb-test-snapshots-"))
        os.environ["MURMUR_NB_SNAPSHOTS"] = str(store)
        config.add_cleanup(functools.partial(remove_tree, store))


@pytest.fixture
def facet_home(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """``<tmp_path>/home`` holding the modules the test file names in ``FACET_MODULES``."""
    home = tmp_path / "home"
    specs: list[tuple[str, ...]] = getattr(request.module, "FACET_MODULES", [("good",)])
    for spec in specs:
        install(home, *spec)
    return home


@pytest.fixture
def log_root(tmp_path: Path) -> Path:
    """``<tmp_path>/log``, which anyone may write: the batch tests' modules write one file per
    real run into it (mapped as their ``log`` root), so a test counts the rows that ran.
    ``<tmp_path>/jobs`` beside it holds what the long-running ones leave."""
    for name in ("log", "jobs"):
        (tmp_path / name).mkdir()
        (tmp_path / name).chmod(0o777)
    return tmp_path / "log"


@pytest.fixture
def murmur_home(tmp_path: Path) -> Path:
    """An empty murmur home at ``<tmp_path>/murmur``."""
    home = tmp_path / "murmur"
    home.mkdir()
    return home


@pytest.fixture(scope="module")
def demo_home(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> mnb.DemoHome:
    """The demo home, shared by the tests of one file; with the hook built if ``DEMO_HOOKS``."""
    hooks = bool(getattr(request.module, "DEMO_HOOKS", False))
    return mnb.prepare_demo_home(tmp_path_factory.mktemp("demo") / "demo", hooks=hooks)


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A ``0755`` folder of root's in ``/tmp`` the test account can pass through (it cannot
    reach ``tmp_path``); its ``scratch`` is where the account's commands run."""
    top = Path(tempfile.mkdtemp(prefix="mnb-reach-"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(params=["shared", "theirs"])
def open_folder(reachable: Path, request: pytest.FixtureRequest) -> Path:
    """A folder the test account can write, in :func:`reachable`: root's, open to every
    account and not sticky (``shared``), or the account's own (``theirs``)."""
    folder = reachable / request.param
    folder.mkdir()
    if request.param == "shared":
        folder.chmod(0o777)
    else:
        os.chown(folder, test_user(), test_user())
    return folder


@pytest.fixture
def only_root(tmp_path: Path) -> Path:
    """A folder only root may write or read (``tmp_path`` is root's, ``0700``)."""
    folder = tmp_path / "root-only"
    folder.mkdir(mode=0o700)
    return folder

