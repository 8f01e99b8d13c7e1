"""Lazy package faces: a package names its public objects in `__all__` and imports the
module that holds one only when it is first used (PEP 562 module `__getattr__`).

Why: `import storlab` (and every `storlab.x.y`, which runs the package `__init__`s first)
stays cheap, so `storlab --help` does not pay for pandas, scipy and matplotlib, and a
package face never creates an import circle with the modules below it.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any


def attach(package: str, names: Mapping[str, str]
           ) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """`__all__`, `__getattr__` and `__dir__` for `package`, where `names` maps each public
    name to the module that defines it, relative to the package (".campaign") or absolute.
    A value of "module:attr" exports `attr` of that module under the key's name. Other
    public attributes are the package's submodules, imported on first use."""
    table = dict(names)

    def __getattr__(name: str) -> Any:
        try:
            where = table[name]
        except KeyError:
            # `import storlab; storlab.sim.simulate(...)`: a subpackage loads on first use too
            if not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}"):
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module, _, attr = where.partition(":")
        value = getattr(importlib.import_module(module, package), attr or name)
        globals_of(package)[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals_of(package)) | set(table))

    return sorted(table), __getattr__, __dir__


def globals_of(package: str) -> dict[str, Any]:
    import sys

    return vars(sys.modules[package])
