"""The layers hold: no import cycle, and each layer imports only what its contract allows.

The graph is read with ``ast`` from the three source folders, under their installed names
(``npuwatch/`` → ``npuwatch``, ``probes/`` → ``npuwatch.probes``, ``widgets/`` →
``npuwatch.widgets``).  Every import counts: top-level ones, the lazy ones inside functions and
those under ``if TYPE_CHECKING:`` — a lazy import is still a dependency, it only runs later
(import-linter counts top-level imports only, which is why this is a test and not a linter
contract).  ``import a.b`` names the module ``a.b``; ``from a import b`` names ``a.b`` when that
is a module, else ``a``.  A parent package's ``__init__`` is not counted as imported.

When a contract fails, move the shared thing down a layer (a record to the model, a fact to the
doctor's facts, a parser to the probes) rather than adding an exception; an exception names the
one function that needs it and why.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

import pytest

from tests.conftest import REPO

#: Source folder → the import name it installs under (pyproject.toml ``package-dir``).
FOLDERS = {"npuwatch": "npuwatch", "probes": "npuwatch.probes", "widgets": "npuwatch.widgets"}

PROBES = "npuwatch.probes"
WIDGETS = "npuwatch.widgets"

# --- probes: the hardware layer --------------------------------------------------------------
#: What a probe may import besides the standard library and other probes.  Probes read the
#: machine and return model records; they must run headless, in a self-test child, and under
#: ``check``'s small import budget, so they know nothing of sampling, judging, views or commands.
PROBE_MAY_IMPORT = (
    "npuwatch.model",  # the records probes fill in
    "npuwatch.chip_source",  # the backend-neutral chip-source contract (model layer) probes implement
    "npuwatch.chip_details",  # the on-demand details records chip sources answer with (model layer)
    "npuwatch.metrics_table",  # the metric table's ranges (a DCMI process's memory ceiling; model layer)
    "npuwatch.chip_families",  # the chip-family table: PCI IDs, SoC folders, device nodes (model layer)
    "npuwatch.source_info",  # what a chip source is and reads, which each backend declares (model layer)
)
#: Third-party modules a probe may import.
PROBE_THIRD_PARTY = frozenset(
    {
        "psutil",  # host CPU/memory/process facts: the one runtime dependency besides textual
    }
)

# --- widgets: the view layer -----------------------------------------------------------------
#: What a view must not import: views render records they are given; reading the hardware,
#: running doctor checks or wiring a feed belongs to the probes, the doctor and the commands.
WIDGET_FORBIDDEN = (
    "npuwatch.probes",  # views never read hardware (docs/design.md §1)
    "npuwatch.doctor.checks",  # a view shows a doctor report, it never runs a check
    "npuwatch.feeds",  # feed wiring: the composition root is the command's, not the view's
    "npuwatch.sampler",  # a view reads a feed.SnapshotFeed, whatever implements it
    "npuwatch.replay",  # a replay's transport is feed.ReplayControls
)
#: Named exceptions, harlequin-style: (view module, function holding the import) → (the
#: forbidden modules it may import, why).  Only a command entry function that opens the feed its
#: view then only reads belongs here.
WIDGET_EXCEPTIONS: Mapping[Tuple[str, str], Tuple[Tuple[str, ...], str]] = {
    ("npuwatch.widgets.tui.app", "run_dashboard"): (
        ("npuwatch.feeds",),
        "the dashboard command's entry point opens the feed the app then only reads",
    ),
    ("npuwatch.widgets.notebook.hub", "_default_factory"): (
        ("npuwatch.feeds",),
        "the notebook hub's default factory opens the shared feed its live views subscribe to",
    ),
}

#: Names a view may take from a forbidden module: (module, name) → why.
WIDGET_MAY_NAME: Mapping[Tuple[str, str], str] = {
    ("npuwatch.feeds", "FeedOptions"): (
        "the frozen record naming what to open: views hold and compare it, only entry points open it"
    ),
    ("npuwatch.feeds", "OpeningFeed"): (
        "the feed the command began opening before the toolkit was imported: the dashboard's entry "
        "point takes it over"
    ),
}

# --- doctor checks: leaves the registry runs -------------------------------------------------
#: A doctor check never imports another check: the facts several checks share (the CANN home in
#: use and its version, the user the doctor runs as, the visible-devices variables as read) are
#: machine facts (``npuwatch.doctor.machine`` / ``npuwatch.doctor.facts``), so changing one
#: check's verdict or wording can never change another's, and a check can be run on its own.
CHECKS = "npuwatch.doctor.checks"

# --- the model layer: records, the chip-source seam, the metric table, the judge ----------------
#: These modules are what every other layer shares, so they import only the standard library and
#: each other: the judge is pure functions over the model (no probe, no sampler, no view), so
#: ``check``, the doctor, the exporter and every view can ask it for the same verdict.
MODEL_LAYER = (
    "npuwatch.model",
    "npuwatch.metrics_table",
    "npuwatch.chip_source",
    "npuwatch.chip_details",
    "npuwatch.chip_link",  # the per-chip link record (issue 28)
    "npuwatch.source_info",  # what read the chips (issue 28 seam)
    "npuwatch.chip_families",  # the chip-family table (issue 28 seam)
    "npuwatch.judge",
    "npuwatch.source_info",  # what a source read (issue 28)
    "npuwatch.chip_families",  # the chip-family table (issue 28)
)

# --- core: everything in npuwatch.* that is not a probe or a view ----------------------------
#: Command entry modules: they pick a view for their output, so they may import widgets.  The
#: rest of the core (model, sampling, judging, doctor engine and checks, exporter) is used by
#: every view and must not depend on one (nor load a UI toolkit for ``check`` or ``serve``).
CORE_ENTRY_MODULES = frozenset(
    {
        "npuwatch.cli",  # the command line: dispatches to the dashboard or a text view
        "npuwatch.jupyter",  # the %npuwatch magic: renders into the notebook
        "npuwatch.notebook",  # the notebook API: returns notebook views
        "npuwatch.live_text",  # `npuwatch --plain`: the text view's refresh loop
        "npuwatch.doctor.command",  # `npuwatch doctor`: prints the doctor's text report
        "npuwatch.fleet.command",  # `npuwatch fleet`: opens the live view
    }
)


# --- pending: violations other work in progress removes (issue 15); delete each when it is gone -
#: An import edge (importer, imported) closing a cycle → who removes it.  The cycle check runs
#: on the graph without these edges, so any other cycle still fails.
PENDING_CYCLE_EDGES: Mapping[Tuple[str, str], str] = {}
#: "(view module) imports forbidden module" → who removes it.
PENDING_WIDGET_IMPORTS: Mapping[str, str] = {}


@dataclass(frozen=True)
class Import:
    """One imported name: who imports it, where, and the function holding it (``""``: top level)."""

    importer: str
    target: str  # a module's dotted name (``from pkg import attr`` names pkg)
    place: str  # "widgets/tui/app.py:28"
    function: str
    name: str = ""  # the name taken from it: ``from target import name`` ("" for ``import target``)


def module_files(root: Path) -> Dict[str, Path]:
    """Every module of the three folders under ``root``, by its import name."""
    found: Dict[str, Path] = {}
    for folder, name in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([name, *parts])] = path
    return found


class _Collector(ast.NodeVisitor):
    """Every imported name of one file, with the enclosing function's qualified name."""

    def __init__(self, package: str, modules: Mapping[str, Path]) -> None:
        self.package = package
        self.modules = modules
        self.scope: List[str] = []
        self.found: List[Tuple[str, int, str, str]] = []

    def _scoped(self, node: ast.AST, name: str) -> None:
        self.scope.append(name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node, node.name)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._scoped(node, node.name)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node, node.name)

    def _add(self, module: str, line: int, name: str = "") -> None:
        self.found.append((module, line, ".".join(self.scope), name))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:  # ruff bans relative imports; resolve them anyway
            base = self.package.split(".")[: len(self.package.split(".")) - node.level + 1]
            module = ".".join([*base, *([module] if module else [])])
        for alias in node.names:
            # ``from pkg import name`` imports the module pkg.name when there is one, else pkg.
            candidate = f"{module}.{alias.name}"
            if candidate in self.modules:
                self._add(candidate, node.lineno)
            else:
                self._add(module, node.lineno, alias.name)


def imports_of(module: str, path: Path, modules: Mapping[str, Path], root: Path) -> List[Import]:
    """The imports of one file; ours resolved to a module of ours."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    collector = _Collector(package, modules)
    collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    place = str(path.relative_to(root))
    result = []
    for target, line, function, name in collector.found:
        result.append(Import(module, target, f"{place}:{line}", function, name))
    return result


def all_imports(root: Path) -> List[Import]:
    modules = module_files(root)
    return [imp for name, path in modules.items() for imp in imports_of(name, path, modules, root)]


def graph(imports: Sequence[Import]) -> Dict[str, Set[str]]:
    """Our module → our modules it imports (self-imports dropped)."""
    ours = {imp.importer for imp in imports}
    edges: Dict[str, Set[str]] = {}
    for imp in imports:
        if imp.target in ours and imp.target != imp.importer:
            edges.setdefault(imp.importer, set()).add(imp.target)
    return edges


def strongly_connected(edges: Mapping[str, Set[str]]) -> List[List[str]]:
    """Tarjan's components with more than one module: each holds at least one cycle."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def cycle_through(start: str, members: Set[str], edges: Mapping[str, Set[str]]) -> List[str]:
    """The shortest cycle from ``start`` back to it inside one component: ``[a, b, …, a]``."""
    parent: Dict[str, Optional[str]] = {start: None}
    queue = [start]
    for node in queue:  # breadth first; the list grows as it is walked
        for nxt in sorted(edges.get(node, set()) & members):
            if nxt == start:
                path: List[str] = [node]
                while (up := parent[path[-1]]) is not None:
                    path.append(up)
                return [*reversed(path), start]
            if nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    return [start]  # unreachable inside a strongly connected component


def cycles(
    imports: Sequence[Import], leave_out: Iterable[Tuple[str, str]] = ()
) -> Dict[FrozenSet[str], List[str]]:
    """Each tangle's modules → its cycles (the shortest through each module), every edge placed."""
    edges = graph(imports)
    for importer, imported in leave_out:
        edges.get(importer, set()).discard(imported)
    found: Dict[FrozenSet[str], List[str]] = {}
    for component in strongly_connected(edges):
        paths: List[str] = []
        for start in component:
            path = cycle_through(start, set(component), edges)
            steps = []
            for a, b in zip(path, path[1:]):
                places = sorted({imp.place for imp in imports if imp.importer == a and imp.target == b})
                steps.append(f"{a} → {b} ({', '.join(places)})")
            line = " ; ".join(steps)
            if not any(_same_cycle(line, seen) for seen in paths):
                paths.append(line)
        found[frozenset(component)] = paths
    return found


def _same_cycle(one: str, other: str) -> bool:
    """Two printed cycles are the same ring of edges started at different modules."""
    return sorted(one.split(" ; ")) == sorted(other.split(" ; "))


def within(name: str, prefixes: Sequence[str]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def is_stdlib(top: str) -> bool:
    names: Optional[FrozenSet[str]] = getattr(sys, "stdlib_module_names", None)
    if names is not None:
        return top in names
    spec = importlib.util.find_spec(top)  # Python 3.9 has no stdlib_module_names
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return spec is not None
    return Path(spec.origin).is_relative_to(sysconfig.get_paths()["stdlib"])


def probe_violations(imports: Sequence[Import]) -> Iterator[str]:
    for imp in imports:
        if not within(imp.importer, [PROBES]):
            continue
        top = imp.target.split(".")[0]
        if top == "npuwatch":
            allowed = within(imp.target, [PROBES, *PROBE_MAY_IMPORT])
        else:
            allowed = top in PROBE_THIRD_PARTY or is_stdlib(top)
        if not allowed:
            yield f"{imp.place} ({imp.importer}) imports {imp.target}"


def widget_violations(imports: Sequence[Import]) -> Iterator[str]:
    for imp in imports:
        if not within(imp.importer, [WIDGETS]) or not within(imp.target, WIDGET_FORBIDDEN):
            continue
        allowed, _reason = WIDGET_EXCEPTIONS.get((imp.importer, imp.function), ((), ""))
        if imp.target not in allowed and (imp.target, imp.name) not in WIDGET_MAY_NAME:
            scope = f" in {imp.function}()" if imp.function else ""
            yield f"{imp.place}{scope} ({imp.importer}) imports {imp.target}"


def check_violations(imports: Sequence[Import]) -> Iterator[str]:
    for imp in imports:
        if within(imp.importer, [CHECKS]) and imp.importer != CHECKS and within(imp.target, [CHECKS]):
            yield f"{imp.place} ({imp.importer}) imports {imp.target}"


def model_violations(imports: Sequence[Import]) -> Iterator[str]:
    for imp in imports:
        if not within(imp.importer, MODEL_LAYER):
            continue
        top = imp.target.split(".")[0]
        if (top == "npuwatch" and not within(imp.target, MODEL_LAYER)) or (
            top != "npuwatch" and not is_stdlib(top)
        ):
            yield f"{imp.place} ({imp.importer}) imports {imp.target}"


def core_violations(imports: Sequence[Import]) -> Iterator[str]:
    for imp in imports:
        if within(imp.importer, [PROBES, WIDGETS]) or imp.importer in CORE_ENTRY_MODULES:
            continue
        if within(imp.target, [WIDGETS]):
            yield f"{imp.place} ({imp.importer}) imports {imp.target}"


def known(found: Iterable[str], pending: Mapping[str, str]) -> List[str]:
    """What the contract still finds once the pending, owned violations are set aside."""
    return sorted({item for item in found if not any(mark in item for mark in pending)})


IMPORTS = all_imports(REPO)


def test_no_import_cycle_lazy_and_type_checking_imports_included():
    found = [
        f"{sorted(members)}:\n  " + "\n  ".join(paths)
        for members, paths in cycles(IMPORTS, leave_out=PENDING_CYCLE_EDGES).items()
    ]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_probes_import_only_stdlib_psutil_the_model_and_other_probes():
    found = known(probe_violations(IMPORTS), {})
    assert not found, "\n".join(found)


def test_views_never_import_probes_doctor_checks_or_feed_wiring():
    found = known(widget_violations(IMPORTS), PENDING_WIDGET_IMPORTS)
    assert not found, "\n".join(found)


def test_doctor_checks_share_machine_facts_never_import_each_other():
    found = known(check_violations(IMPORTS), {})
    assert not found, "\n".join(found)


def test_the_model_layer_and_the_judge_import_only_the_standard_library_and_each_other():
    found = known(model_violations(IMPORTS), {})
    assert not found, "\n".join(found)


def test_core_imports_views_only_from_command_entry_modules():
    found = known(core_violations(IMPORTS), {})
    assert not found, "\n".join(found)


def test_every_exception_and_pending_entry_is_still_needed():
    # A named exception no import uses any more is a hole left open in the contract; a pending
    # entry whose violation is gone must be deleted here, so the contract holds from then on.
    used = {(imp.importer, imp.function, imp.target) for imp in IMPORTS}
    unused = [
        key
        for key, (targets, _reason) in WIDGET_EXCEPTIONS.items()
        if not any((*key, target) in used for target in targets)
    ]
    assert unused == []
    tangles = list(cycles(IMPORTS))
    gone_cycles = [edge for edge in PENDING_CYCLE_EDGES if not any(set(edge) <= tangle for tangle in tangles)]
    assert gone_cycles == [], "delete these from PENDING_CYCLE_EDGES in tests/repo/test_layers.py"
    violations = list(widget_violations(IMPORTS))
    gone = [mark for mark in PENDING_WIDGET_IMPORTS if not any(mark in item for item in violations)]
    assert gone == [], "delete these from PENDING_WIDGET_IMPORTS in tests/repo/test_layers.py"
    entries = {imp.importer for imp in IMPORTS if within(imp.target, [WIDGETS])}
    assert sorted(CORE_ENTRY_MODULES - entries) == [], "an entry module that no longer imports views"


# --- the checker itself: each rule fires on a deliberately bad import ------------------------


def _fake_tree(root: Path, files: Mapping[str, str]) -> List[Import]:
    """The imports of a made-up tree: ``{"npuwatch.a": "source", …}`` under ``root``."""
    for name, text in files.items():
        parts = name.split(".")
        folder = (
            {"probes": "probes", "widgets": "widgets"}.get(parts[1], "npuwatch") if len(parts) > 1 else ""
        )
        rest = parts[2:] if folder in ("probes", "widgets") else parts[1:]
        path = root / folder / "/".join(rest or ["__init__"])
        path = path.with_suffix(".py") if rest else path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for folder in FOLDERS:
        (root / folder).mkdir(exist_ok=True)
    return all_imports(root)


def test_a_lazy_or_type_checking_import_closes_a_cycle_and_its_path_is_named(tmp_path):
    imports = _fake_tree(
        tmp_path,
        {
            "npuwatch.a": "from npuwatch import b\n",
            "npuwatch.b": "def f():\n    import npuwatch.c\n",
            "npuwatch.c": "import typing\nif typing.TYPE_CHECKING:\n    from npuwatch.a import X\n",
        },
    )
    assert list(cycles(imports).values()) == [
        [
            "npuwatch.a → npuwatch.b (npuwatch/a.py:1) ; npuwatch.b → npuwatch.c (npuwatch/b.py:2) ; "
            "npuwatch.c → npuwatch.a (npuwatch/c.py:3)"
        ]
    ]


@pytest.mark.parametrize(
    ("module", "text", "rule"),
    [
        ("npuwatch.probes.x", "import textual\n", probe_violations),
        ("npuwatch.probes.x", "def f():\n    from npuwatch.sampler import Sampler\n", probe_violations),
        ("npuwatch.widgets.x", "def f():\n    from npuwatch.probes.pci import scan_pci\n", widget_violations),
        ("npuwatch.widgets.x", "from npuwatch.doctor.checks import npu_smi\n", widget_violations),
        ("npuwatch.alerts", "def f():\n    import npuwatch.widgets.text\n", core_violations),
        ("npuwatch.doctor.checks.a", "from npuwatch.doctor.checks import npu_smi\n", check_violations),
    ],
)
def test_each_contract_catches_a_bad_import(tmp_path, module, text, rule):
    imports = _fake_tree(
        tmp_path,
        {
            module: text,
            "npuwatch.sampler": "",
            "npuwatch.probes.pci": "",
            "npuwatch.doctor.checks.npu_smi": "",
            "npuwatch.widgets.text": "",
        },
    )
    assert len(list(rule(imports))) == 1


def test_an_entry_function_may_open_a_feed_but_not_the_rest_of_its_module(tmp_path):
    text = (
        "def run_dashboard():\n    from npuwatch.feeds import open_feed\n\n\n"
        "def other():\n    import npuwatch.feeds\n"
    )
    imports = _fake_tree(tmp_path, {"npuwatch.widgets.tui.app": text, "npuwatch.feeds": ""})
    assert [item.split(" ")[0] for item in widget_violations(imports)] == ["widgets/tui/app.py:6"]


def test_a_view_may_name_the_feed_options_but_not_open_a_feed(tmp_path):
    text = "from npuwatch.feeds import FeedOptions\nfrom npuwatch.feeds import open_feed\n"
    imports = _fake_tree(tmp_path, {"npuwatch.widgets.notebook.x": text, "npuwatch.feeds": ""})
    assert [item.split(" ")[0] for item in widget_violations(imports)] == ["widgets/notebook/x.py:2"]
