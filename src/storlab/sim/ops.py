"""The simulator's request operations (their codes index the engine's per-op arrays); a
module of their own so the ring, failure and model modules share them without a circle;
with them, the size of a draw block, which the model and the failure routing share."""

OPS = ("PUT", "GET", "DELETE")
PUT, GET, DELETE = 0, 1, 2

#: Requests drawn per block: every block after the first has its own random streams
#: (seed, k, block), so a run can be drawn, routed and simulated block by block and give the
#: same requests as drawing it whole; a run of at most DRAW_BLOCK requests draws exactly as
#: before blocks existed.
DRAW_BLOCK = 1 << 16
