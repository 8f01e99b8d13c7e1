"""The report's HTML comes out of Jinja2 templates only (issue 14): no Python string in
`storlab/report/` writes a tag, and nothing there escapes by hand. Reads the source's AST,
so docstrings (which may name a tag) are allowed and everything else is checked."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import storlab.report

REPORT = Path(storlab.report.__file__).parent
# `<` then a tag name (or `/`, `!`, or a placeholder `{`): "<p", "</div>", "<{heading}>".
TAG = re.compile(r"<[/!]?([A-Za-z][A-Za-z0-9-]*|\{)")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (module, class, function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.add(id(body[0].value))
    return out


def _literal_text(node: ast.AST) -> str | None:
    """The text of a string literal; an f-string's parts with `{}` for each placeholder."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def html_in_python(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal that writes a tag, every hand escape."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if id(node) in docs or id(node) in inner:
            continue
        text = _literal_text(node)
        if text is not None and TAG.search(text):
            found.append((node.lineno, text[:60]))
        # The standard library's html (not report/html.py, `from . import html`).
        if isinstance(node, ast.Import) and any(a.name == "html" for a in node.names) or \
                isinstance(node, ast.ImportFrom) and node.level == 0 and (
                    node.module == "html" or node.module == "markupsafe"
                    and any(a.name == "escape" for a in node.names)):
            found.append((node.lineno, "imports an escaper"))
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("escape", "Markup"):  # Markup(text) declares text safe by hand
                found.append((node.lineno, f"calls {name}()"))
    return found


def test_the_detector_sees_html_in_strings() -> None:
    """It must catch what it is there to catch, or it proves nothing."""
    bad = '''
import html
def f(x, h):
    """A <table> in a docstring is fine."""
    a = "<h2>Results</h2>"
    b = f'<p class="note">{x}</p>'
    c = f"<{h}>title</{h}>"
    d = html.escape(x)
    return Markup(x) + "</div>"
'''
    lines = sorted({line for line, _ in html_in_python(bad)})
    assert lines == [2, 5, 6, 7, 8, 9], html_in_python(bad)
    good = '''
def f(x):
    """Returns a <dl>."""
    return macro("dl")([("a < b", x), ("width", f"{x}px"), ("cmp", "1 <= 2")])
'''
    assert html_in_python(good) == []


def test_report_python_writes_no_html() -> None:
    files = sorted(REPORT.rglob("*.py"))
    assert len(files) >= 5  # build, html, inputs, sections, __init__
    found = {str(p.relative_to(REPORT)): hits for p in files
             if (hits := html_in_python(p.read_text()))}
    assert found == {}, ("HTML belongs in report/templates/*.j2 (autoescaped macros), "
                         f"not in Python strings: {found}")
