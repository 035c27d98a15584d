"""Refusing a pytest run that would import code from the folder it was asked to check.

Design notes
------------
``pytest --modproto PATH`` runs the module in the sandbox, but pytest itself imports Python
files as the user, outside any sandbox, before a plugin's check can run: the initial
``conftest.py`` files (those of the folder pytest starts in and of its ``test*``
sub-folders, of the test paths named, of ``testpaths``, up to the rootdir) and the plugins
named by ``-p`` in the ``addopts`` of the configuration file found from where it starts (with
``pythonpath = .`` a plugin is a file of that folder). Those files are the module author's.
So the checker never runs where pytest would reach them: the plugin refuses when

* pytest started inside the checked folder (a hook's folder: the one holding the component),
  or its rootdir or configuration file lies there;
* an initial conftest would come from there: a test path inside it, or a ``testpaths`` entry
  (unless ``--noconftest``);
* a file from there is already imported. A plugin named in ``addopts`` is imported before
  any other plugin's hook runs, so this cannot be prevented, only said: the refusal names
  the file and says that it ran.

:func:`refusal` runs first in ``pytest_load_initial_conftests`` (before pytest imports the
initial conftests), again right after it, and in ``pytest_configure``. A refusal is a
:class:`pytest.UsageError`: exit status 4, no test summary. During collection the checked
folders are never entered (:func:`inside_any`), so a test path around one does not reach in.
The advice is the command that imports nothing from the folder wherever it runs
(``murmur-nb check``), then pytest from outside with ``--noconftest``. Only starting outside
is safe: a configuration file in the folder can switch this plugin off (``-p no:murmur_nb``),
and then pytest imports the conftests before it stops on the unknown ``--modproto``.
"""

from __future__ import annotations

import glob
import shlex
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Target", "imported_from", "inside_any", "refusal", "targets"]


@dataclass(frozen=True)
class Target:
    """One thing pytest was asked to check, and the folder whose code it must not import."""

    option: str  # "--modproto" or "--hook"
    path: Path  # the module folder or the component, resolved
    folder: Path  # the module folder, or the folder holding the component
    config: Path | None = None  # --hook-config, resolved

    def noun(self) -> str:
        return "module folder" if self.option == "--modproto" else "hook component's folder"

    def advice(self) -> list[str]:
        """The commands that check the same target and import nothing from its folder."""
        path, outside = shlex.quote(str(self.path)), shlex.quote(str(self.folder.parent))
        if self.option == "--modproto":
            return [f"murmur-nb check {path}",
                    f"cd {outside} && pytest --modproto {path} --noconftest"]  # fmt: skip
        config = shlex.quote(str(self.config)) if self.config else None
        return [
            f"murmur-nb check-hook {path}" + (f" --config {config}" if config else ""),
            f"cd {outside} && pytest --hook {path}"
            + (f" --hook-config {config}" if config else "") + " --noconftest",
        ]


def targets(
    modproto: Sequence[str], hooks: Sequence[str], hook_config: str | None, base: Path
) -> list[Target]:
    """The targets named on the command line, resolved against ``base`` (where pytest started)."""
    config = (base / hook_config).resolve() if hook_config else None
    out = [Target("--modproto", (base / p).resolve(), (base / p).resolve()) for p in modproto]
    for given in hooks:
        path = (base / given).resolve()
        out.append(Target("--hook", path, path if path.is_dir() else path.parent, config))
    return out


def inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def inside_any(path: Path, checked: Iterable[Target]) -> bool:
    """Whether ``path`` lies in a folder being checked (collection never enters one)."""
    resolved = path.resolve()
    return any(inside(resolved, t.folder) for t in checked)


def _trusted_roots() -> list[Path]:
    """Where the interpreter, the installed packages and murmur-nb itself live: a file there
    is not the checked folder's even when that folder holds them (a venv inside it)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(__file__).parents[1])}
    return [Path(r).resolve() for r in roots]


def imported_from(folder: Path, modules: Iterable[Any]) -> list[Path]:
    """Files of ``folder`` among ``modules`` (module objects: ``sys.modules``, plugins)."""
    trusted = _trusted_roots()
    found: set[Path] = set()
    for module in modules:
        file = getattr(module, "__file__", None)
        if not isinstance(file, str):
            continue
        path = Path(file).resolve()
        if inside(path, folder) and not any(inside(path, root) for root in trusted):
            found.add(path)
    return sorted(found)


def _anchors(named: Sequence[str], testpaths: Sequence[str], config: Any) -> list[Path]:
    """The folders pytest loads initial conftests from (and up from), as it computes them."""
    base: Path = config.invocation_params.dir
    rootpath: Path = config.rootpath
    found: list[Path] = []
    if named:
        found = [base / str(a).split("::")[0] for a in named]
    elif base == rootpath:
        found = [Path(p) for t in testpaths  # as pytest expands them: absolute ones too
                 for p in glob.glob(str(rootpath / t), recursive=True)]  # noqa: PTH207
    found = [p for p in found if p.exists()] or [base]  # pytest falls back to where it started
    anchors = []
    for anchor in found:
        anchors.append(anchor.resolve())
        if anchor.is_dir():
            anchors += [x.resolve() for x in anchor.glob("test*") if x.is_dir()]
    return anchors


def _started_inside(target: Target, config: Any, named: Sequence[str], noconftest: bool
                    ) -> str | None:  # fmt: skip
    """Why pytest, as started, would import the target folder's files; ``None`` if it won't."""
    folder = target.folder
    where = config.invocation_params.dir.resolve()
    if inside(where, folder):
        return f"pytest started inside {folder}, the {target.noun()} it was asked to check"
    if inside(config.rootpath.resolve(), folder):
        return f"pytest's rootdir {config.rootpath} lies inside the {target.noun()} {folder}"
    if config.inipath is not None and inside(config.inipath.resolve(), folder):
        return f"pytest read its configuration from {config.inipath}, inside {folder}"
    if noconftest:
        return None
    testpaths = [] if named else list(config.getini("testpaths"))
    for anchor in _anchors(named, testpaths, config):
        if inside(anchor, folder):
            return (f"pytest would import the conftest.py files of {anchor}, inside the "
                    f"{target.noun()} {folder} (it imports those of the test paths it is "
                    "given, of testpaths, and of the test* folders where it starts)")  # fmt: skip
    return None


def _already(target: Target, files: list[Path]) -> str:
    names = ", ".join(str(f.relative_to(target.folder)) for f in files)
    verb = "was" if len(files) == 1 else "were"
    return (
        f"{names} in {target.folder} {verb} already imported by pytest before the checker could "
        "refuse: its code ran as you, outside the sandbox (a conftest, or a plugin named by "
        "-p in a pytest.ini/tox.ini addopts). Nothing was checked"
    )


def refusal(config: Any, checked: Sequence[Target], named: Sequence[str], noconftest: bool,
            modules: Iterable[Any]) -> str | None:  # fmt: skip
    """The refusal's message, or ``None`` when pytest imports nothing from a checked folder.

    ``config`` is pytest's (its ``rootpath``, ``inipath`` and ``invocation_params`` are read),
    ``named`` the test paths on the command line, ``modules`` every module imported so far.
    """
    loaded = list(modules)
    lines = []
    for target in checked:
        files = imported_from(target.folder, loaded)
        why = _already(target, files) if files else _started_inside(
            target, config, named, noconftest
        )
        if why is None:
            continue
        lines += [f"pytest {target.option} refused: {why}.",
                  "pytest imports conftest.py files (and the plugins a pytest.ini or tox.ini "
                  "names in addopts) as you, outside the sandbox, before any check can run; the "
                  "checker never runs where they would be the checked folder's. Check it from "
                  "outside the folder:",
                  *(f"    {command}" for command in target.advice())]  # fmt: skip
    return "\n".join(lines) or None
