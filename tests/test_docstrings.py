"""Docstrings do not point at names that moved or went: every dotted cross-reference resolves.

A Sphinx role naming a ``murmur_nb`` path (``:mod:`murmur_nb._sandbox.identity```) or a
path relative to the module's package (``:mod:`.snapshot```) must name a module, or an
attribute of one, that exists. The package split of issue 23 left such references behind;
this keeps the next move from doing it again. Bare names (``:meth:`close```) are not checked:
they may be instance attributes.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import murmur_nb

PACKAGE = Path(murmur_nb.__file__).parent
ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|exc|obj):`~?([^`<>]+?)`")


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` is an importable module, or a chain of attributes of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def dangling(path: Path, text: str | None = None) -> list[str]:
    """The dotted references in the file at ``path`` (or in ``text``) that name nothing."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module.removesuffix(".__init__") if path.name == "__init__.py" else (
        module.rpartition(".")[0]
    )
    text = path.read_text(encoding="utf-8") if text is None else text
    found = []
    for match in ROLE.finditer(text):
        target = match.group(1).strip().removesuffix("()")
        if target.startswith(".") and not target.startswith(".."):
            target = package + target
        elif not target.startswith("murmur_nb."):
            continue
        if not resolves(target):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {match.group(0)}")
    return found


def test_every_dotted_reference_in_a_docstring_resolves() -> None:
    files = [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if "_demo" not in path.parts
    ]
    assert [line for path in files for line in dangling(path)] == []


def test_a_reference_to_a_moved_module_is_reported() -> None:
    probe = PACKAGE / "_checker" / "probe.py"
    text = (
        '"""See :mod:`.snapshot` and :func:`murmur_nb._schemas.descriptor.gone`,\n'
        'but :mod:`murmur_nb._modules.snapshot` and :func:`.check.check_module` exist."""\n'
    )
    assert dangling(probe, text) == [
        "murmur_nb/_checker/probe.py:1: :mod:`.snapshot`",
        "murmur_nb/_checker/probe.py:1: :func:`murmur_nb._schemas.descriptor.gone`",
    ]


def public_exceptions() -> list[str]:
    """The exception and warning classes ``murmur_nb`` exports."""
    return sorted(
        name
        for name in murmur_nb.__all__
        if name != "widgets"
        and isinstance(getattr(murmur_nb, name), type)
        and issubclass(getattr(murmur_nb, name), BaseException)
    )


def test_every_public_exception_has_a_docstring_of_its_own() -> None:
    """``help(mnb.InvalidInput)`` says when it is raised, its ``code`` and what to do; a class
    without ``__doc__`` of its own showed only its parents' words."""
    assert len(public_exceptions()) >= 25
    thin = []
    for name in public_exceptions():
        cls = getattr(murmur_nb, name)
        doc = cls.__dict__.get("__doc__") or ""
        code = cls.__dict__.get("code")
        if len(doc.split()) < 12 or (isinstance(code, str) and code not in doc):
            thin.append(name)
    assert thin == []


def test_descriptor_error_is_documented_as_the_old_name_of_descriptor_problem() -> None:
    assert murmur_nb.DescriptorError is murmur_nb.DescriptorProblem
    assert "DescriptorError" in (murmur_nb.DescriptorProblem.__doc__ or "")
    assert "DescriptorError" in (murmur_nb.__doc__ or "")


def test_the_package_docstring_points_to_the_entry_points_not_to_private_modules() -> None:
    doc = murmur_nb.__doc__ or ""
    for name in ("prepare_demo_home", "ModuleHost", "HookHost", "read_conversation",
                 "read_conversations", "render", "widgets"):  # fmt: skip
        assert re.search(rf"\b{name}\b", doc), name
    assert re.findall(r"(?<![\w.])_[a-z]\w*", doc) == []
