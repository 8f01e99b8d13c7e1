"""The simulator's request operations (their codes index the engine's per-op arrays); a
module of their own so the ring, failure and model modules share them without a circle."""

OPS = ("PUT", "GET", "DELETE")
PUT, GET, DELETE = 0, 1, 2
