"""pytest plugin: ``pytest --modproto PATH`` checks a modproto v1 module, one test per check;
``pytest --hook COMPONENT.wasm`` checks a hook component, one test per rule.

Installed with murmur-nb (entry point ``pytest11``), it does nothing until ``--modproto`` is
given, so it costs other test runs one option. Given without test paths, it collects only
the module checks (not the tests of the folder it runs in). Each row of
:func:`murmur_nb.check_module`'s report becomes a test item, worst first as in the report: a
failed check fails with the same text as ``murmur-nb check`` prints for it (what happened,
the module's exit status and stderr tail, the input as JSON, a one-line reproduction, the
rule and the fix, wrapped to the terminal); a skipped check (approval needed, setup missing)
is skipped with the reason; a warning passes and shows in the item's report sections.

Node ids follow pytest's: the path of the module's executable from the rootdir, then the
check, its capability and path as parameters (``wd/module::invoke.artifacts_verify[wd.run]``
``[execution.artifacts[note]]``). Given back as a test path (with ``--modproto wd``), an id
selects that check again, and ``--lf`` reruns the failed ones: the plugin collects a checked
folder named on the command line itself (:func:`pytest_collect_directory`), as one file, its
``module``, never entering it. Every node of a checked folder calls its hooks as the session
folder does, so pytest never imports a ``conftest.py`` of that folder for them.

Options: ``--modproto PATH`` (repeatable), ``--modproto-examples N``, ``--modproto-seed S``,
``--modproto-boundaries N``, ``--modproto-budget SECONDS``, ``--modproto-approve CAPABILITY``
(repeatable).

Hooks: ``--hook PATH`` (repeatable) runs :func:`murmur_nb.check_hook` on the component once
and collects one item per rule, failing with the rule, what happened and the fix;
``--hook-config MURMUR_YAML`` gives the limits the calls run under.

The checker never imports code from the folder it checks (the module folder; the folder
holding the component): pytest started inside it, with its rootdir, configuration file or a
test path there, is refused before pytest imports the initial conftests, with the command to
run instead; a file of that folder pytest had already imported is named, and the run fails
(exit status 4, no summary). Collection never enters a checked folder. See
:mod:`murmur_nb._checker.pytest_guard`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import pluggy

    from murmur_nb._checker.check_report import CheckResult
    from murmur_nb._checker.hook_report import HookCheckResult
    from murmur_nb._checker.pytest_guard import Target

__all__ = [
    "CheckedFolder",
    "HookCheck",
    "HookCheckFailed",
    "HookComponent",
    "ModprotoCheck",
    "ModprotoCheckFailed",
    "ModprotoModule",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("modproto", "modproto v1 module checks (murmur-nb)")
    group.addoption("--modproto", action="append", default=[], metavar="PATH",
                    help="check the modproto v1 module in this folder (repeatable)")
    group.addoption("--modproto-examples", type=int, default=5, metavar="N",
                    help="random inputs generated per capability (default 5)")
    group.addoption("--modproto-boundaries", type=int, default=None, metavar="N",
                    help="at most N boundary inputs per capability, sent before the random "
                    "ones (default: the checker's; 0 for none)")
    group.addoption("--modproto-budget", type=float, default=None, metavar="SECONDS",
                    help="time a capability's calls may take, each call's deadline cut to "
                    "what is left (default: the checker's; 0 for no limit)")
    group.addoption("--modproto-seed", type=int, default=0, metavar="SEED",
                    help="input generator seed (default 0)")
    group.addoption("--modproto-approve", action="append", default=[], metavar="CAPABILITY",
                    help="also invoke this capability although it needs approval")
    hooks = parser.getgroup("murmur-hook", "hook component checks (murmur-nb)")
    hooks.addoption("--hook", action="append", default=[], metavar="PATH",
                    help="check the hook component in this .wasm file (repeatable)")
    hooks.addoption("--hook-config", default=None, metavar="MURMUR_YAML",
                    help="run the hook's calls under the limits of this murmur.yaml")


#: the targets of this run, once ``pytest_configure`` has let it go on
CHECKED = pytest.StashKey[list["Target"]]()
#: the targets already collected from a test path naming them (their resolved paths)
COLLECTED = pytest.StashKey[set[Path]]()


def _refuse_imports(config: pytest.Config, namespace: Any) -> list[Target]:
    """The run's targets; :class:`pytest.UsageError` when pytest would import, or already
    imported, code from a folder it was asked to check
    (:mod:`murmur_nb._checker.pytest_guard`)."""
    from murmur_nb._checker.pytest_guard import refusal, targets  # noqa: PLC0415 - when used

    modproto, hooks = getattr(namespace, "modproto", []), getattr(namespace, "hook", [])
    if not (modproto or hooks):
        return []
    checked = targets(modproto or [], hooks or [], getattr(namespace, "hook_config", None),
                      config.invocation_params.dir)  # fmt: skip
    modules = [*sys.modules.values(), *config.pluginmanager.get_plugins()]
    named = getattr(namespace, "file_or_dir", None) or []
    message = refusal(config, checked, named, bool(namespace.noconftest), modules)
    if message is not None:
        raise pytest.UsageError(message)
    for given, target in zip([*(modproto or []), *(hooks or [])], checked, strict=True):
        missing = _missing(target)
        if missing is not None:
            raise pytest.UsageError(f"{target.option} {given}: {missing}")
    return checked


def _missing(target: Target) -> str | None:
    """Why there is nothing to check at ``target``, or ``None``."""
    from murmur_nb._checker.check import module_folder  # noqa: PLC0415 - when used
    from murmur_nb._exceptions import ModuleNotFound  # noqa: PLC0415

    if target.option == "--hook":
        return None if target.path.exists() else (
            f"{target.path} does not exist; give the hook's .wasm component")  # fmt: skip
    try:
        module_folder(target.path)
    except ModuleNotFound as exc:
        return exc.message
    return None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> Iterator[None]:
    """Refuse before pytest imports the initial conftests, and again once it has."""
    _refuse_imports(early_config, early_config.known_args_namespace)
    yield
    _refuse_imports(early_config, early_config.known_args_namespace)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.stash[CHECKED] = _refuse_imports(config, config.option)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``--modproto`` or ``--hook``: never enter a checked folder, and with no test paths
    named, collect only the checks.

    ``pytest --modproto PATH`` run in a project folder would otherwise also collect every
    test under it; naming test paths (``pytest tests --modproto PATH``) collects both, but
    never the checked folder's files (collecting them imports them).
    """
    checked = config.stash.get(CHECKED, [])
    if not checked:
        return None
    from murmur_nb._checker.pytest_guard import inside_any  # noqa: PLC0415 - when used

    if inside_any(collection_path, checked):
        return True
    return config.args_source is not pytest.Config.ArgsSource.ARGS or None


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A checked folder a test path names (``wd/module::describe.runs``, or ``wd``): its
    checks, collected by the plugin; pytest's own collector would enter it."""
    checked = parent.config.stash.get(CHECKED, [])
    if checked and any(t.folder == path.resolve() for t in checked):
        return CheckedFolder.from_parent(parent, path=path, nodeid=_node_id(parent, path))
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A checked module's executable (or hook component) named as a test path outside the
    rootdir, where pytest collects the file without its folder."""
    for target in parent.config.stash.get(CHECKED, []):  # none without --modproto, --hook
        if _target_file(target) == file_path.resolve():
            return _checked_file(parent, target, file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """The checks of every target no test path named, after the tests collected."""
    collected = config.stash.get(COLLECTED, set())
    for target in config.stash.get(CHECKED, []):
        if _target_file(target) not in collected:
            items += _collected(_checked_file(session, target, _target_file(target)))


def _target_file(target: Target) -> Path:
    """The file a target's checks hang from: a module's executable, or the component."""
    return target.path / "module" if target.option == "--modproto" else target.path


def _node_id(parent: pytest.Collector, path: Path) -> str:
    """``path`` as pytest's node ids name files: from the rootdir, with ``/``."""
    return Path(os.path.relpath(path, parent.config.rootpath)).as_posix()


def _checked_file(parent: pytest.Collector, target: Target, path: Path) -> _Checked:
    """The collector of ``target``'s checks, under ``parent``, remembered as collected."""
    parent.config.stash.setdefault(COLLECTED, set()).add(_target_file(target))
    kind = ModprotoModule if target.option == "--modproto" else HookComponent
    return kind.from_parent(parent, path=path, nodeid=_node_id(parent, path), target=target)


def _collected(collector: _Checked) -> list[pytest.Item]:
    """Collect ``collector`` through pytest's own hooks, as it collects a node it found: its
    items count in the "collected N items" line, and a checker that raises is a collection
    error (reported, the run interrupted), not an internal error."""
    ihook = collector.ihook
    ihook.pytest_collectstart(collector=collector)
    report: pytest.CollectReport = ihook.pytest_make_collect_report(collector=collector)
    ihook.pytest_collectreport(report=report)
    return [node for node in report.result if isinstance(node, pytest.Item)]


class _SessionHooks:
    """Of a node: it calls its hooks as the session folder does (pytest would import the
    ``conftest.py`` files of a node's own folder, here the checked one, to call them)."""

    session: pytest.Session

    @property
    def ihook(self) -> pluggy.HookRelay:
        return self.session.gethookproxy(self.session.path)


class CheckedFolder(_SessionHooks, pytest.Directory):
    """A checked folder collected from a test path: its targets' checks, not its files."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        resolved = self.path.resolve()
        return [_checked_file(self, t, self.path / _target_file(t).name)
                for t in self.config.stash.get(CHECKED, []) if t.folder == resolved]  # fmt: skip


class _Checked(_SessionHooks, pytest.File):
    """One checked target (a module folder, a component): its rows, from one checker run."""

    def __init__(self, *, target: Target, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target = target

    def item_id(self, name: str) -> str:
        """The node id of this target's check ``name`` (pytest's: ``file::name[params]``)."""
        return f"{self.nodeid}::{name}"


class _Row(_SessionHooks, pytest.Item):
    """One row of a checker's report as a test: it passes, fails with the row's text (the
    rule and the fix), or is skipped with the reason; a warning passes and shows the text
    in the item's report sections."""

    failed: type[Exception] = Exception
    kind = ""

    def __init__(self, *, result: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.result = result

    def runtest(self) -> None:
        row = self.result
        if row.status == "skipped":
            pytest.skip(row.detail)
        if row.status == "warn":
            self.add_report_section("call", f"{self.kind} warning", self.text())
        if row.status == "fail":
            raise self.failed(row.detail)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if not isinstance(excinfo.value, self.failed):
            return str(super().repr_failure(excinfo))
        return self.text()

    def text(self) -> str:
        raise NotImplementedError

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.kind} check {self.name}"


class ModprotoCheckFailed(Exception):
    """A module check failed; the message carries the rule, where and the fix."""


class ModprotoModule(_Checked):
    """The checks of one module folder, collected by running the checker once."""

    def collect(self) -> list[pytest.Item]:
        from murmur_nb._checker.check import check_module  # noqa: PLC0415 - only when used

        config = self.config
        limits = {
            name: value
            for name, option in (("boundaries", "--modproto-boundaries"),
                                 ("budget", "--modproto-budget"))
            if (value := config.getoption(option)) is not None
        }  # fmt: skip
        report = check_module(
            self.target.path,
            examples=config.getoption("--modproto-examples"),
            seed=config.getoption("--modproto-seed"),
            approve=config.getoption("--modproto-approve") or [],
            **limits,
        )
        return list(self._items(report.ordered()))

    def _items(self, results: list[CheckResult]) -> Iterator[pytest.Item]:
        seen: dict[str, int] = {}
        for row in results:
            name = row.check + (f"[{row.capability}]" if row.capability else "")
            if row.path:  # no quotes: an id is copied into a shell
                name += "[" + row.path.replace("'", "").replace('"', "") + "]"
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name += f"[{seen[name]}]"
            yield ModprotoCheck.from_parent(self, name=name, result=row,
                                            nodeid=self.item_id(name))  # fmt: skip


class ModprotoCheck(_Row):
    """One check of the module: passes, fails with the rule and fix, or skips with why."""

    failed = ModprotoCheckFailed
    kind = "modproto"
    result: CheckResult

    def text(self) -> str:
        """The row as ``murmur-nb check`` prints it, wrapped to pytest's terminal width."""
        from murmur_nb._checker.check_report import problem_text  # noqa: PLC0415 - when used

        writer = self.config.get_terminal_writer()
        return problem_text(self.result, max(60, min(120, writer.fullwidth)))


class HookCheckFailed(Exception):
    """A hook rule failed; the message carries what happened."""


class HookComponent(_Checked):
    """The rules of one hook component, collected by running the hook checker once."""

    def collect(self) -> list[pytest.Item]:
        from murmur_nb._checker.hook_check import check_hook  # noqa: PLC0415 - only when used

        report = check_hook(self.target.path, config=self.config.getoption("--hook-config"))
        return [HookCheck.from_parent(self, name=row.check, result=row,
                                      nodeid=self.item_id(row.check)) for row in report]


class HookCheck(_Row):
    """One rule of the hook world: passes, fails with the rule and fix, or skips with why."""

    failed = HookCheckFailed
    kind = "hook"
    result: HookCheckResult

    def text(self) -> str:
        row = self.result
        if row.status != "fail":
            return row.detail
        return "\n".join([f"{row.check} failed", f"  detail: {row.detail}",
                          f"  rule:   {row.rule}", f"  fix:    {row.fix}"])  # fmt: skip
