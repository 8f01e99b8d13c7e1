"""One error module (issue 14): every exception class storlab defines lives in
`storlab/errors.py`; a module that used to define one re-exports it for old imports."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "storlab"
BUILTIN_EXC = {n for n, v in vars(builtins).items()
               if isinstance(v, type) and issubclass(v, BaseException)}


def exception_classes(source: str) -> list[str]:
    """Names of the classes in `source` whose bases look like exceptions (a built-in one,
    or a name ending in Error / Exception)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for b in node.bases:
                name = b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                if name in BUILTIN_EXC or name.endswith(("Error", "Exception")):
                    out.append(node.name)
                    break
    return out


def test_the_finder_finds_exception_classes() -> None:
    src = ("class A(ValueError): pass\nclass B(errors.StorlabError): pass\n"
           "class C(A): pass\nclass D: pass\nclass E(dict): pass\n")
    assert exception_classes(src) == ["A", "B"]  # C derives from a local name: see below


def test_every_exception_class_is_in_errors_py() -> None:
    found = {str(p.relative_to(ROOT)): names for p in sorted(ROOT.rglob("*.py"))
             if p.name != "errors.py" or p.parent != ROOT
             if (names := exception_classes(p.read_text()))}
    assert found == {}, f"exception classes outside storlab/errors.py: {found}"


@pytest.mark.parametrize("module, name", [
    ("storlab.sim.ringfile", "RingFileError"), ("storlab.clusters.netns", "NetnsError"),
    ("storlab.sim.ringbuild", "RingBuildError"), ("storlab.sim.engine", "EngineNotBuiltError"),
    ("storlab.campaign.runners", "SubstitutionError"),
    ("storlab.campaign.runners", "ShellTemplateError")])
def test_old_imports_still_find_the_moved_classes(module: str, name: str) -> None:
    import importlib

    from storlab import errors

    assert getattr(importlib.import_module(module), name) is getattr(errors, name)
