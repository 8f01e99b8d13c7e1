"""The one result shape every analysis, model, simulation and tuning result has (issue 14):

- `to_frame()`: its main table as a DataFrame;
- `to_dict()`: everything it says, JSON-safe (plain numbers, NaN as null), what `--json`
  prints;
- `plot(kind=...)`: a matplotlib Figure, `kind` one of the class's `PLOT_KINDS` (the first
  is the default); an unknown kind is one line naming the known ones.

`table()` stays as the old name of `to_frame()`: examples and benchmarks call it.
`tests/contract/test_results.py` checks every subclass."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from .errors import StorlabError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


class Result:
    """Base of the result objects; subclasses set PLOT_KINDS and implement the three."""

    #: The figures `plot(kind)` draws; the first is the default.
    PLOT_KINDS: ClassVar[tuple[str, ...]] = ()
    #: The error an unknown plot kind raises (the package's own StorlabError).
    ERROR: ClassVar[type[StorlabError]] = StorlabError

    def to_frame(self) -> pd.DataFrame:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def plot(self, kind: str | None = None) -> Figure:
        raise NotImplementedError

    def table(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        """The old name of `to_frame` (examples and benchmarks use it)."""
        return self.to_frame(*args, **kwargs)

    def plot_kind(self, kind: str | None) -> str:
        """`kind`, or the default (the first of PLOT_KINDS) when None; an unknown kind is
        one line naming the known ones."""
        if kind is None:
            return self.PLOT_KINDS[0]
        if kind not in self.PLOT_KINDS:
            raise self.ERROR(f"{type(self).__name__} plot kind {kind!r} must be one of "
                             f"{', '.join(self.PLOT_KINDS)}")
        return kind
