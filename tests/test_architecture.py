"""The import structure of src/storlab, read from the source (ast), never by importing it.

Holds these rules (docs/architecture.md explains the layers):
- no import from a higher layer into a lower one, and none between the independent packages
  of one rung (design and analysis are siblings, as SALib's sample/ and analyze/ are);
- no import circle between modules (function-level imports count: they are dependencies
  too; `if TYPE_CHECKING:` imports do not, they never run);
- no private name imported across modules, and no private module (`_x.py`) imported from
  outside the package directory that holds it;
- the campaign core names no design kind, runner or tuning;
- `commands/` imports only package faces; every lazy face mirrors its names for static tools.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "storlab"

#: The layers, lowest first. Each rung is a set of packages (or top-level modules) that may
#: import from any lower rung, never from a higher one, and never from each other.
#: "" is the package face (`storlab/__init__.py`): the top, importing everything lazily.
LAYERS: list[set[str]] = [
    {"errors", "_lazy"},        # the one error module; lazy package faces
    {"jsonutil", "limits"},     # plain values, shared limits
    {"units", "plotstyle", "result_shape", "metrics"},  # sizes, rates and mixes; figure style;
                                # result shape; the measurement columns runners write
    {"fileio", "_proc_lifetime"},     # atomic files and readers; child-process hygiene
    {"constraints"},            # constraint expressions (whitelisted ast)
    {"space"},                  # factors, responses, YAML spaces
    {"sim", "clusters"},        # systems under study: the simulated and the real ones (and
                                # clusters.netns: namespace "hosts" to load them from)
    {"design", "analysis"},     # samplers and analysers, siblings: neither imports the other
    {"campaign"},               # the run loop, design sources, store, runners (with the
                                # object-store load generator they drive), executors
    {"estimate", "tune"},       # built on the run loop (measure, adaptive sources)
    {"report"},                 # HTML report: reads results and design metadata
    {"commands"},               # the CLI's commands: thin
    {"cli"},                    # the `storlab` program
    {"__main__"},               # `python -m storlab`: runs the program
    {""},                       # `import storlab`: the public face
]
RANK = {pkg: i for i, rung in enumerate(LAYERS) for pkg in rung}

#: The modules of a split package, lowest first, as LAYERS orders packages: a module imports
#: only from a lower rung of its package (a face re-exporting the others sits on top).
#: Imports under `if TYPE_CHECKING:` do not count: they never run.
MODULE_LAYERS: dict[str, list[set[str]]] = {
    "estimate": [
        {"cells"},                  # a measured cell; size, percentage and mix checks
        {"uncertainty"},            # delta method, t bounds
        {"fit", "mixrule"},         # one size's fit; the size-mix rules
        {"modelerror"},             # the model's error: own, pooled, shrunk (empirical Bayes)
        {"plots"},                  # figures (reached from predict/rwmodel at call time)
        {"predict"},                # a prediction and its intervals
        {"rwmodel"},                # RWModel: fits over sizes, tables, its JSON file
        {"tables"},                 # results tables in: fit_table, split_table, mixed_checks
        {"quietdev"},               # a quiet device
        {"measure"},                # measuring it through the campaign loop
    ],
    "campaign.runners": [
        {"_host_sockets"},          # the host's Unix sockets, every network namespace's
        {"_sandbox"},               # the bubblewrap walls
        {"_program", "cluster_walls"},  # a run's program inside them; a cluster's
        {"base"},                   # RunResult, the Runner protocol
        {"objload"},                # the object-store load generator, one host
        {"fanout"},                 # the same from several hosts
        {"fio_parse", "fio_cmdline"},  # fio's output read; its options and command line
        {"fio_targets"},            # the paths a fio job opens, destructive ones refused
        {"fio_guard"},              # what a fio job is granted in the sandbox, and refused
        {"fio", "command", "postmark", "sysbench", "simulator", "objectstore"},  # runners
        {"ceph_values"},            # what may reach root's ceph argv (values, who)
        {"ceph"},                   # drives the fio or object-store runner as its load
    ],
}

#: Circles that are known and wait for a split another change owns; each with its reason.
KNOWN_CIRCLES: dict[frozenset[str], str] = {}


@dataclass(frozen=True)
class Edge:
    src: str      # importing module, e.g. storlab.campaign.runners.fio
    dst: str      # imported module (a package means its __init__)
    name: str     # the imported name ("" for `import x`)
    line: int
    typing_only: bool

    def __str__(self) -> str:
        what = f" ({self.name})" if self.name else ""
        return f"{self.src}:{self.line} -> {self.dst}{what}"


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    p = SRC.joinpath(*name.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def _typing_blocks(tree: ast.AST) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:`."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
                getattr(node.test, "id", None) == "TYPE_CHECKING"
                or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            for sub in node.body:
                out |= {id(n) for n in ast.walk(sub)}
    return out


def _edges() -> list[Edge]:
    edges = []
    for path in sorted(ROOT.rglob("*.py")):
        mod = _module(path)
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        edges += _edges_of(ast.parse(path.read_text(), str(path)), mod, pkg)
    return edges


def _edges_of(tree: ast.AST, mod: str, pkg: str) -> list[Edge]:
    """The storlab imports of module `mod` (in package `pkg`), parsed as `tree`."""
    edges = []
    typing = _typing_blocks(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "storlab":
                    edges.append(Edge(mod, a.name, "", node.lineno, id(node) in typing))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "storlab":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                if _is_module(sub):  # `from . import units` imports a module
                    edges.append(Edge(mod, sub, "", node.lineno, id(node) in typing))
                else:
                    edges.append(Edge(mod, target, a.name, node.lineno, id(node) in typing))
    return edges


EDGES = _edges()


def _package(module: str) -> str:
    """The layer unit of a module: storlab.campaign.store -> campaign; storlab -> ""."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_package_has_a_layer():
    pkgs = {_package(_module(p)) for p in ROOT.rglob("*.py")}
    assert pkgs - set(RANK) == set(), "add the new package to LAYERS (and the docs)"


def test_no_import_from_a_higher_layer_or_a_sibling():
    bad = []
    for e in EDGES:
        a, b = _package(e.src), _package(e.dst)
        if a == b or (b == "" and e.name.startswith("__")):  # __version__ is metadata
            continue
        if RANK[b] >= RANK[a]:
            bad.append(f"{e}  [{a or 'storlab'} may not import {b or 'storlab'}]")
    assert not bad, "\n".join(bad)


def _cycles(edges: list[Edge]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if e.src != e.dst:
            graph.setdefault(e.src, set()).add(e.dst)
            graph.setdefault(e.dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    runtime = [e for e in EDGES if not e.typing_only]
    circles = [sorted(c) for c in _cycles(runtime) if frozenset(c) not in KNOWN_CIRCLES]
    assert not circles, circles


def test_known_circles_are_still_circles():
    """An entry of KNOWN_CIRCLES that no longer exists must be removed (the list shrinks)."""
    runtime = [e for e in EDGES if not e.typing_only]
    found = {frozenset(c) for c in _cycles(runtime)}
    assert set(KNOWN_CIRCLES) <= found


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def test_no_private_name_crosses_a_module():
    bad = []
    for e in EDGES:
        if e.name and _private(e.name) and e.dst != e.src:
            bad.append(str(e))
        parts = e.dst.split(".")
        for i, part in enumerate(parts):
            if _private(part):
                owner = ".".join(parts[:i])  # the package directory holding the module
                if not (e.src == owner or e.src.startswith(owner + ".")):
                    bad.append(f"{e}  [private module of {owner}]")
    assert not bad, "\n".join(bad)


def test_the_cycle_finder_finds_cycles():
    e = [Edge("a", "b", "", 1, False), Edge("b", "c", "", 1, False), Edge("c", "a", "", 1, False),
         Edge("c", "d", "", 1, False)]
    assert _cycles(e) == [{"a", "b", "c"}]


def test_split_packages_keep_their_module_order():
    bad = []
    for pkg, rungs in MODULE_LAYERS.items():
        rank = {m: i for i, rung in enumerate(rungs) for m in rung}
        prefix = f"storlab.{pkg}."
        mods = {_module(p) for p in ROOT.joinpath(*pkg.split(".")).glob("*.py")
                if p.name != "__init__.py"}
        missing = {m.removeprefix(prefix) for m in mods} - set(rank)
        assert not missing, f"add {sorted(missing)} to MODULE_LAYERS[{pkg!r}]"
        for e in EDGES:
            if e.typing_only or not (e.src.startswith(prefix) and e.dst.startswith(prefix)):
                continue
            a, b = e.src.removeprefix(prefix), e.dst.removeprefix(prefix).split(".")[0]
            if a != b and rank[b] >= rank[a]:
                bad.append(f"{e}  [{a} may not import {b}]")
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------ tests run the program one way

TESTS = Path(__file__).resolve().parent

#: Test files that may start the program by hand, each with its reason; an entry that no
#: longer does must be removed (the list only shrinks).
OWN_PROGRAM: dict[str, str] = {
    "test_startup.py": "checks `python -m storlab` itself (storlab/__main__.py), which the "
                       "fixtures, running storlab.cli, do not reach",
}


def _own_program(tree: ast.AST) -> list[str]:
    """Where a test module builds the CLI invocation itself: an argv holding `-m storlab...`,
    or typer's CliRunner (the shared fixtures in conftest.py are the one way)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            vals = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if any(a == "-m" and isinstance(b, str) and b.split(".")[0] == "storlab"
                   for a, b in zip(vals, vals[1:])):
                found.append(f"{node.lineno}: argv `-m {vals[vals.index('-m') + 1]}`")
        elif isinstance(node, ast.ImportFrom) and any(a.name == "CliRunner"
                                                      for a in node.names):
            found.append(f"{node.lineno}: imports CliRunner")
        elif (isinstance(node, ast.ImportFrom) and node.module == "storlab.cli"
              and any(a.name == "main" for a in node.names)):
            found.append(f"{node.lineno}: imports storlab.cli.main (use storlab_main)")
        elif isinstance(node, ast.Attribute) and node.attr == "CliRunner":
            found.append(f"{node.lineno}: uses CliRunner")
    return found


def test_tests_run_the_program_through_the_shared_fixtures():
    """`storlab`, `storlab_argv`, `storlab_inprocess` and `storlab_main` (tests/conftest.py)
    are how a test runs the CLI, so that which program is tested is decided in one place."""
    bad, seen = [], set()
    for path in sorted(TESTS.rglob("*.py")):
        rel = str(path.relative_to(TESTS))
        if rel == "conftest.py":
            continue
        hits = _own_program(ast.parse(path.read_text(), str(path)))
        if hits and rel in OWN_PROGRAM:
            seen.add(rel)
        elif hits:
            bad += [f"tests/{rel}:{h}" for h in hits]
    assert not bad, "use the storlab / storlab_argv fixtures:\n" + "\n".join(bad)
    assert seen == set(OWN_PROGRAM), f"remove {sorted(set(OWN_PROGRAM) - seen)} from OWN_PROGRAM"


def test_the_program_finder_finds_hand_made_invocations():
    src = ('import sys, subprocess\nfrom typer.testing import CliRunner\n'
           'subprocess.run([sys.executable, "-m", "storlab.cli", "run"])\n'
           'ARGV = (sys.executable, "-m", "storlab")\nsubprocess.run(["python", "-c", "x"])\n'
           'from storlab.cli import app, main\nfrom storlab.cli import app\n')
    assert sorted(int(h.split(":")[0]) for h in _own_program(ast.parse(src))) == [2, 3, 4, 6]


#: Package faces that still build `__all__` at run time (the lazy `attach` call) without a
#: literal `__all__` and a `TYPE_CHECKING` mirror. The test fails when one of them gains
#: both, so the list only shrinks; today every face has its mirror.
FACES_WITHOUT_MIRROR: set[str] = set()


def _face(path: Path) -> tuple[dict[str, str], object, dict[str, str]] | None:
    """A lazy package face's attach mapping (name -> absolute module), its `__all__` (a
    list of strings when written as a literal, else None) and its `TYPE_CHECKING` imports
    (name -> absolute module); None for a package without a lazy face."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = _module(path)
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", "") == "attach"), None)
    if call is None:
        return None

    def absolute(where: str) -> str:
        mod, _, _ = where.partition(":")
        if not mod.startswith("."):
            return mod
        up = len(mod) - len(mod.lstrip("."))
        base = pkg.split(".")[: len(pkg.split(".")) - up + 1]
        return ".".join(base + [mod.lstrip(".")] if mod.lstrip(".") else base)

    lazy = {k: absolute(v) for k, v in ast.literal_eval(_literal_dict(call.args[1])).items()}
    declared = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__"
                                                for t in node.targets):
            try:
                declared = ast.literal_eval(node.value)
            except ValueError:
                declared = None
    mirror: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom):
                    target = absolute("." * imp.level + (imp.module or "")) if imp.level \
                        else imp.module or ""
                    for a in imp.names:
                        mirror[a.asname or a.name] = target
    return lazy, declared, mirror


def _literal_dict(node: ast.expr) -> str:
    """The source of a dict display whose `**{n: m for n in (...)}` parts are expanded, so
    that `ast.literal_eval` reads it."""
    out: dict[str, str] = {}
    assert isinstance(node, ast.Dict)
    for key, value in zip(node.keys, node.values):
        if key is None:  # **{n: ".x" for n in ("a", "b")}
            assert isinstance(value, ast.DictComp)
            names = ast.literal_eval(value.generators[0].iter)
            out.update({n: ast.literal_eval(value.value) for n in names})
        else:
            out[ast.literal_eval(key)] = ast.literal_eval(value)
    return repr(out)


def test_package_faces_are_visible_to_static_tools():
    """Every lazy package face writes `__all__` as a literal list and mirrors its lazy names
    in an `if TYPE_CHECKING:` block importing each from the module the loader takes it from,
    so type checkers, editors and readers see what `from storlab.x import y` gives."""
    seen = set()
    for path in sorted(ROOT.rglob("__init__.py")):
        face = _face(path)
        if face is None:
            continue
        pkg = _module(path)
        lazy, declared, mirror = face
        if pkg in FACES_WITHOUT_MIRROR:
            assert not (isinstance(declared, list) and mirror), \
                f"{pkg} has its mirror now: remove it from FACES_WITHOUT_MIRROR"
            continue
        seen.add(pkg)
        assert isinstance(declared, list), f"{pkg}: write __all__ as a literal list"
        assert set(lazy) <= set(declared), f"{pkg}: __all__ lacks {set(lazy) - set(declared)}"
        assert mirror == lazy, (f"{pkg}: the TYPE_CHECKING mirror and the lazy names differ: "
                                f"{set(mirror.items()) ^ set(lazy.items())}")
    assert {"storlab", "storlab.analysis", "storlab.sim", "storlab.campaign", "storlab.tune",
            "storlab.campaign.runners"} <= seen


#: The campaign core: the face, the run loop, the plan, the store's meta, the checks before a
#: run, the run documents and the sandbox in words. They know design
#: sources, runners and executors only through their seams (`sources`, the `runners` face,
#: `executors`), never one of them by name.
#: Runner types that are also plain words of the code.
PLAIN_WORDS = {"command"}
CORE = ("storlab.campaign.campaign", "storlab.campaign.loop", "storlab.campaign.plan",
        "storlab.campaign.storemeta", "storlab.campaign.preflight",
        "storlab.campaign.documents", "storlab.campaign.sandbox_summary")


def _literal_keys(path: Path, name: str) -> set[str]:
    """The string keys (or items) of the module-level literal `name` in `path`."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and name in [
                getattr(t, "id", None) for t in (node.targets if isinstance(node, ast.Assign)
                                                 else [node.target])]:
            value = node.value
            items = value.keys if isinstance(value, ast.Dict) else value.elts  # type: ignore
            return {i.value for i in items if isinstance(i, ast.Constant)}
    raise AssertionError(f"{path}: no literal {name}")


def _code_words(tree: ast.AST) -> list[tuple[int, str]]:
    """Every identifier, attribute and string constant of a module but its docstrings (and
    comments, which ast drops), with its line."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.append((n.lineno, n.id))
        elif isinstance(n, ast.Attribute):
            out.append((n.lineno, n.attr))
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            out.append((n.lineno, n.name))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            out.append((n.lineno, n.value))
    return out


def test_the_campaign_core_names_no_design_kind_runner_or_tuning():
    """Every design is a source and every runner a plug-in: the core imports neither a
    design package, a runner's module nor tuning, and its code (docstrings aside) names no
    design kind, no runner type, no tuning and no fio."""
    runners = _literal_keys(ROOT / "campaign" / "runners" / "__init__.py", "REGISTRY")
    kinds = _literal_keys(ROOT / "design" / "__init__.py", "KINDS")
    assert {"fio", "simulator", "command"} <= runners and {"full", "lhs"} <= kinds
    bad = [str(e) for e in EDGES if e.src in CORE and (
        e.dst.startswith(("storlab.design", "storlab.tune"))
        or (e.dst.startswith("storlab.campaign.runners.")))]
    words = sorted(runners | kinds | {"tune", "tuning", "fio"})
    for mod in CORE:
        path = SRC.joinpath(*mod.split(".")).with_suffix(".py")
        for line, text in _code_words(ast.parse(path.read_text())):
            low = text.lower()
            parts = set(re.split(r"[^a-z0-9]+", low))
            # "command" is also a plain word (shell_command): only said alone does it count
            hit = [w for w in words if low == w or (w in parts and w not in PLAIN_WORDS)]
            if hit:
                bad.append(f"{mod}:{line} names {hit[0]!r} ({text[:60]!r})")
    assert not bad, "the campaign core knows a design kind, runner or tuning by name:\n" \
        + "\n".join(bad)


def test_the_core_rule_sees_a_name():
    """The word check finds a runner named in code, as the rule needs it to."""
    tree = ast.parse('"""fio in a docstring is fine."""\nif kind == "fio":\n    tune_store()\n')
    words = [t for _, t in _code_words(tree)]
    assert "fio" in words and "tune_store" in words and not any("docstring" in w for w in words)


# ------------------------------------------------------------------ the CLI reads faces only

def _is_face(module: str) -> bool:
    """A package's face (its `__init__`: `storlab.campaign`, `storlab.campaign.runners`) or a
    top-level module, which is its own face (`storlab.fileio`)."""
    parts = module.split(".")
    path = SRC.joinpath(*parts)
    return (path / "__init__.py").is_file() or (len(parts) == 2
                                                and path.with_suffix(".py").is_file())


def _deep_imports(edges: list[Edge], package: str = "storlab.commands") -> list[str]:
    """The imports of `package`'s modules that reach past a face into another package's
    module (`storlab.campaign.store`), `if TYPE_CHECKING:` ones included."""
    own = (package, package + ".")
    return [str(e) for e in edges
            if e.src.startswith(own) and not e.dst.startswith(own) and not _is_face(e.dst)]


def test_commands_import_only_faces():
    """The CLI's commands call the library through its faces (the names each package's
    `__init__` lists), so a package may move its modules around without touching them."""
    bad = _deep_imports(EDGES)
    assert not bad, "import these from the package's face (export them there):\n" \
        + "\n".join(bad)


def test_the_face_rule_sees_a_deep_import():
    """The rule finds a deep import, a submodule taken from a face, and nothing else."""
    src = ("from ..campaign.store import FAILED\nfrom ..campaign import Campaign\n"
           "from ..campaign.runners import is_metric\nfrom ..fileio import read_table\n"
           "from ._common import console\nfrom ..analysis import importance\n"
           "import storlab.sim.spec\nif TYPE_CHECKING:\n    from ..tune.result import Q\n")
    edges = _edges_of(ast.parse(src), "storlab.commands.x", "storlab.commands")
    assert len(edges) == 8
    assert [b.split(" ")[0] for b in _deep_imports(edges)] == [
        "storlab.commands.x:1", "storlab.commands.x:6", "storlab.commands.x:7",
        "storlab.commands.x:9"]
