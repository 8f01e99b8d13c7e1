"""A daemon's log writer: reads the daemon's output on stdin and appends it to a log file
that never grows past a cap (the file is rotated to `<log>.1` when it reaches it, keeping
one older generation), leaving out the JSON dump of its whole store that Ceph's memstore
writes at every mount and clean stop (at log level 0, which no configuration silences:
one dump per restart made a 410 MB log).

Run as `python -I _logcap.py LOG MAX_BYTES`; standard library only, so that it starts in
~20 ms. It exits when the daemon closes its output (the daemon exited).
"""

from __future__ import annotations

import io
import os
import re
import signal
import sys

# Ceph log lines start with an ISO timestamp; the dump's JSON lines never do.
_ENTRY = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_DUMP = re.compile(rb"memstore\(.*\) dump:")


def main(argv: list[str]) -> int:
    path, cap = argv[1], int(argv[2])
    # The daemon's session gets signals meant for it; this writer only stops at EOF.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    out = _open(path)
    size = out.tell()
    skipping = 0
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            break
        if skipping:
            if not _ENTRY.match(line):
                skipping += 1
                continue
            line = (b"[storlab: memstore's JSON dump of %d lines left out of this log]\n"
                    % skipping) + line
            skipping = 0
        if _DUMP.search(line):
            out.write(line.split(b" dump:")[0] + b" dump: (left out)\n")
            skipping = 1
            continue
        if size + len(line) > cap and size > 0:
            out.close()
            os.replace(path, path + ".1")
            out = _open(path)
            size = 0
        out.write(line)
        size += len(line)
    if skipping:
        out.write(b"[storlab: memstore's JSON dump of %d lines left out of this log]\n"
                  % skipping)
    out.close()
    return 0


def _open(path: str) -> io.FileIO:
    """The log, appended to, never through a link at its name."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    return open(fd, "ab", buffering=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
