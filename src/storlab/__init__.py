"""storlab: design, run, analyse and simulate storage performance experiments."""

from .errors import StorlabError
from .space import Factor, Response, Space

__all__ = ["Factor", "Response", "Space", "StorlabError"]
__version__ = "0.1.0"
