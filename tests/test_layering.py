"""The package's layers point down, and a back-import fails here (so it fails CI).

Each unit is a subpackage or top-level module of ``murmur_nb``; :data:`LAYERS` lists them
from the top down. A unit may import its own modules and any unit of a *lower* layer, never
one of its own layer or above. Every import counts, also one inside a function or under
``if TYPE_CHECKING:``: a lazy back-import is still a back-arrow. See docs/architecture.md.
"""

from __future__ import annotations

import ast
import graphlib
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
    {"_replay"},  # replaying hooks over records: a driver above the hook host
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


def unit_graph(package: Path) -> dict[str, set[str]]:
    """Which units each unit imports (every import, lazy ones too), read from the files."""
    graph: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        source = unit_of(module)
        targets = {unit_of(target) for _, target in imported_modules(path, module)}
        graph.setdefault(source, set()).update(targets - {source})
    return graph


def import_cycle(package: Path) -> list[str]:
    """A cycle between units of ``package`` (``[]`` when there is none), independent of LAYERS."""
    try:
        graphlib.TopologicalSorter(unit_graph(package)).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_the_import_graph_has_no_cycle_between_subpackages() -> None:
    assert import_cycle(PACKAGE) == []


def test_a_cycle_between_subpackages_is_found(tmp_path: Path) -> None:
    copy = tmp_path / "murmur_nb"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_files" / "sneak.py").write_text("from murmur_nb._modules import host\n")
    cycle = import_cycle(copy)
    assert cycle[0] == cycle[-1] and {"_files", "_modules"} <= set(cycle)


def test_no_folder_holds_more_than_about_fifteen_modules() -> None:
    crowded = {
        str(folder.relative_to(PACKAGE.parent)): count
        for folder in [PACKAGE, *(d for d in PACKAGE.rglob("*") if d.is_dir())]
        if "__pycache__" not in folder.parts and "_demo" not in folder.parts
        if (count := len([p for p in folder.glob("*.py") if p.name != "__init__.py"]))
        > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


# ------------------------------------------------------------------ tests reach private modules

TESTS = Path(__file__).parent
PRIVATE_REASON = "# private:"


def is_private(module: str) -> bool:
    """``murmur_nb._modules.host`` and ``murmur_nb.protocol._fold`` are; ``murmur_nb.widgets``
    is not."""
    parts = module.split(".")
    return parts[0] == "murmur_nb" and any(part.startswith("_") for part in parts[1:])


def private_imports(node: ast.AST) -> list[str]:
    """The private ``murmur_nb`` modules (or private names of a public one) ``node`` imports."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if is_private(alias.name)]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [
            f"{node.module}.{alias.name}"
            for alias in node.names
            if is_private(node.module) or is_private(f"{node.module}.{alias.name}")
        ]
    return []


def unexplained_private_imports(folder: Path) -> list[str]:
    """Every private import in ``folder``'s Python files without a ``# private: <why>`` comment
    on the import itself or on the line right above it."""
    problems: list[tuple[Path, int, str]] = []
    for path in sorted(folder.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = ["", *text.splitlines()]  # lines[n] is line n
        for node in ast.walk(ast.parse(text, str(path))):
            names = private_imports(node)
            if names and not explained(lines, node):
                problems.append((path, node.lineno, ", ".join(names)))
    return [
        f"{path.relative_to(folder.parent)}:{line}: {names} (say why, or go public)"
        for path, line, names in sorted(problems)
    ]


def explained(lines: list[str], node: ast.AST) -> bool:
    """A ``# private: <why>`` on one of the import's lines, or on a comment line right above."""
    assert isinstance(node, ast.stmt) and node.end_lineno is not None
    own = lines[node.lineno : node.end_lineno + 1]
    above = lines[node.lineno - 1]
    near = [*own, above] if above.lstrip().startswith("#") else own
    return any(line.partition(PRIVATE_REASON)[2].strip() for line in near)


def test_tests_reach_private_modules_only_saying_why() -> None:
    """A test uses ``murmur_nb``, ``murmur_nb.protocol`` or ``murmur_nb.widgets``; where no
    public path exists it imports the private module with a one-line ``# private: <why>``."""
    assert unexplained_private_imports(TESTS) == []


def test_a_private_import_without_a_reason_is_reported(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_fine.py").write_text(
        "import murmur_nb\n"
        "from murmur_nb.widgets import LiveRun\n"
        "from murmur_nb._rules import sha256_fd  # private: the digest rule on its own\n"
        "# private: the host's envelope rules\n"
        "from murmur_nb._modules.envelope import (\n    read_envelope,\n)\n"
    )
    (tests / "test_sneaky.py").write_text(
        "from murmur_nb._modules.host import ModuleHost\n"
        "def f():\n"
        "    import murmur_nb._render.core  # private:\n"
        "    from murmur_nb.protocol import _fold\n"
        "    from murmur_nb import _exceptions  # not a reason\n"
        "    from murmur_nb._files import beneath  # private: open beneath a folder\n"
        "    from murmur_nb._files import artifacts\n"
    )
    assert unexplained_private_imports(tests) == [
        "tests/test_sneaky.py:1: murmur_nb._modules.host.ModuleHost (say why, or go public)",
        "tests/test_sneaky.py:3: murmur_nb._render.core (say why, or go public)",
        "tests/test_sneaky.py:4: murmur_nb.protocol._fold (say why, or go public)",
        "tests/test_sneaky.py:5: murmur_nb._exceptions (say why, or go public)",
        "tests/test_sneaky.py:7: murmur_nb._files.artifacts (say why, or go public)",
    ]
