"""The package's layers point down, and a back-import fails here (so it fails CI).

Each unit is a subpackage or top-level module of ``murmur_nb``; :data:`LAYERS` lists them
from the top down. A unit may import its own modules and any unit of a *lower* layer, never
one of its own layer or above. Every import counts, also one inside a function or under
``if TYPE_CHECKING:``: a lazy back-import is still a back-arrow. See docs/architecture.md.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import murmur_nb

PACKAGE = Path(murmur_nb.__file__).parent

#: From the top down; units of one layer do not import each other.
LAYERS: list[set[str]] = [
    {"__init__", "_pytest_plugin"},  # the flat public namespace; the pytest plugin
    {"_demo"},  # the demo home: modules, hooks and a conversation to try things on
    {"widgets"},  # the only users of ipywidgets
    {"_checker"},  # the module checker and the murmur-nb command line
    {"_modules"},  # the host pipeline: ModuleHost.invoke
    {"_knowledge"},  # skills and overlays (rendered as cards)
    {"_hooks", "_render"},  # wasm hooks; artifact rendering
    {"_conversations", "_sandbox", "_forms"},  # records; the OS sandbox; the headless form
    {"_schemas"},  # bounded JSON Schema checks, the describe descriptor
    {"_files"},  # beneath a folder: open, fstat, hash; artifact claims re-checked
    {"_exceptions"},  # the one error tree
    {"protocol", "_rules"},  # the wire vocabulary; rules with no dependency
]
LAYER_OF = {unit: depth for depth, units in enumerate(LAYERS) for unit in units}
MAX_MODULES_PER_FOLDER = 15


def unit_of(module: str) -> str:
    """``murmur_nb._modules.host`` -> ``_modules``; ``murmur_nb`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported_modules(path: Path, module: str) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every ``murmur_nb`` import in the file at ``path``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
    return [(line, name) for line, name in found if name.split(".")[0] == "murmur_nb"]


def back_imports(package: Path) -> list[str]:
    """Every import of ``package`` (a ``murmur_nb`` tree) that does not point down."""
    problems: list[str] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        source = unit_of(module)
        if source not in LAYER_OF:
            problems.append(f"{rel}: {source} is in no layer; add it to LAYERS")
            continue
        for line, target in imported_modules(path, module):
            wanted = unit_of(target)
            if wanted == source:
                continue
            if LAYER_OF.get(wanted, -1) <= LAYER_OF[source]:
                problems.append(f"{rel}:{line}: {source} imports {target} (not below it)")
    return problems


def test_the_package_layers_point_down() -> None:
    assert back_imports(PACKAGE) == []


def test_a_back_import_is_reported_even_when_lazy(tmp_path: Path) -> None:
    copy = tmp_path / "murmur_nb"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert back_imports(copy) == []
    (copy / "_render" / "sneak.py").write_text(
        "def run():\n    from murmur_nb._modules.host import ModuleHost\n    return ModuleHost\n"
    )
    (copy / "_files" / "sneak.py").write_text("from .._sandbox import launch\n")
    (copy / "_hooks" / "sneak.py").write_text("import murmur_nb._render.core\n")
    assert back_imports(copy) == [
        "murmur_nb/_files/sneak.py:1: _files imports murmur_nb._sandbox (not below it)",
        "murmur_nb/_hooks/sneak.py:1: _hooks imports murmur_nb._render.core (not below it)",
        "murmur_nb/_render/sneak.py:2: _render imports murmur_nb._modules.host (not below it)",
    ]


def test_a_new_subpackage_must_be_given_a_layer(tmp_path: Path) -> None:
    copy = tmp_path / "murmur_nb"
    (copy / "_batch").mkdir(parents=True)
    (copy / "_batch" / "__init__.py").write_text("")
    assert back_imports(copy) == [
        "murmur_nb/_batch/__init__.py: _batch is in no layer; add it to LAYERS"
    ]


def test_no_folder_holds_more_than_about_fifteen_modules() -> None:
    crowded = {
        str(folder.relative_to(PACKAGE.parent)): count
        for folder in [PACKAGE, *(d for d in PACKAGE.rglob("*") if d.is_dir())]
        if "__pycache__" not in folder.parts and "_demo" not in folder.parts
        if (count := len([p for p in folder.glob("*.py") if p.name != "__init__.py"]))
        > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}
