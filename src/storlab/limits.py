"""Bounds on what a user can ask for, in one place (no imports: the CLI reads them at
start-up). Each keeps a typo (`--factors 100000 --kind full`, `repetitions: 1000000000`)
from becoming an hour of work or an exhausted memory; each is generous for real work."""

MAX_RUNS = 1_000_000          # rows of a design, runs planned by a campaign
MAX_FACTORS = 1000            # factors of a design
MAX_REPETITIONS = 1000        # repetitions (and replicates) of each configuration
MAX_WARMUP = 100              # discarded warm-up runs per configuration
MAX_SEED = 2**32 - 1          # numpy's seeds are 0 .. 2**32 - 1
MAX_COLUMNS = 10_000          # columns of a results table read from a file
MAX_LEVELS = 100_000          # values of one factor (a typo's million levels hung the designs)
MAX_TIMEOUT = 30 * 86400      # seconds for one run or step (30 days; 1e308 is a typo)
