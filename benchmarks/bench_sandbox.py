"""Cost of the run sandbox: wall time of one program start through `run_program` inside
bubblewrap against the same start unsandboxed (STORLAB_UNSANDBOXED=1), measured in the
same run, interleaved, for `true` (the pure overhead) and a 1-second fio job (what a run
costs), and the same sandboxed start with the execute rules (`executables`: the program
may execute its own files only). Prints the median per-run overhead in ms and the ratio,
and what the execute rules add, in wall time: CPU time
cannot be compared (the processes of a PID namespace are reaped inside it and their
rusage does not reach storlab), so on a loaded machine take the lowest of a few runs.

    .venv/bin/python benchmarks/bench_sandbox.py [--repeats N] [--fio-repeats N]
        [--campaign-files N] [--stdout-mib N]

`--stdout-mib N`: the cost of a program's stdout going through storlab's pipe into the
run's stream file (`_Pump`) for N MiB, against the same program writing that file itself
(a shell redirection), measured in the same run, sandboxed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from storlab.campaign.runners import (UNSANDBOXED_ENV, Declared, declared,  # noqa: E402
                                      run_program)
from storlab.campaign.runners._sandbox import _specials, wrap  # noqa: E402


def timed(fn: Callable[[], object], sandboxed: bool) -> float:
    """Wall seconds of one run, sandboxed or not."""
    if sandboxed:
        os.environ.pop(UNSANDBOXED_ENV, None)
    else:
        os.environ[UNSANDBOXED_ENV] = "1"
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def walk_cost(camp: str, n: int) -> None:
    """Fill `camp` with `n` files in directories of 100, and print what walking it for
    sockets costs: the first walk lists every directory, later ones only those changed."""
    for i in range(n):
        sub = os.path.join(camp, "out", f"d{i // 100}")
        os.makedirs(sub, exist_ok=True)
        open(os.path.join(sub, f"f{i}"), "w").close()
    t0 = time.perf_counter()
    _specials(camp, False)
    first = time.perf_counter() - t0
    times = []
    for _ in range(20):  # the median: one preemption on a loaded machine is 10 ms
        t0 = time.perf_counter()
        _specials(camp, False)
        times.append(time.perf_counter() - t0)
    later = statistics.median(times)
    print(f"walk of the campaign's directory ({n} files): first {first * 1e3:.1f} ms, "
          f"at each later start {later * 1e3:.2f} ms")
    wd = os.path.join(camp, "scratch", "c1-r1")
    with declared(Declared(homes=(camp,))):
        t0 = time.process_time()
        for _ in range(200):
            _, walls = wrap(["true"], wd, env={"PATH": "/usr/bin"})
            assert walls is not None
            walls.close()
        own = (time.process_time() - t0) / 200
    print(f"storlab's own share of a start (building the walls, 200 times): "
          f"{own * 1e3:.2f} ms of CPU")


def stdout_cost(d: str, mib: int, repeats: int) -> None:
    """Wall time of `head -c N MiB /dev/zero` through run_program (stdout piped to the
    run's stream file) against the same command redirecting to a file itself."""
    from storlab.campaign.runners import output_files

    os.environ.pop(UNSANDBOXED_ENV, None)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    piped, direct = [], []
    try:
        for _ in range(repeats):
            for name in ("o.stdout", "o.stderr", "direct"):
                if os.path.exists(os.path.join(d, name)):
                    os.unlink(os.path.join(d, name))
            with output_files(os.path.join(d, "o.stdout"), os.path.join(d, "o.stderr"), fd):
                t0 = time.perf_counter()
                out = run_program(["head", "-c", f"{mib}M", "/dev/zero"], cwd=d)
                piped.append(time.perf_counter() - t0)
            assert out.exit_code == 0, out.stderr
            t0 = time.perf_counter()
            out = run_program(["sh", "-c", f"head -c {mib}M /dev/zero > direct"], cwd=d)
            direct.append(time.perf_counter() - t0)
            assert out.exit_code == 0, out.stderr
    finally:
        os.close(fd)
    p, q = statistics.median(piped), statistics.median(direct)
    print(f"{mib} MiB on stdout, median of {repeats}: through storlab's pipe {p:.2f} s, "
          f"written by the program itself {q:.2f} s ({p / q:.2f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=40, help="runs of `true` per arm")
    ap.add_argument("--fio-repeats", type=int, default=5, help="1-s fio runs per arm")
    ap.add_argument("--campaign-files", type=int, default=0,
                    help="runs in a campaign directory of this many files (walked for "
                         "sockets at each start); 0: none")
    ap.add_argument("--stdout-mib", type=int, default=0,
                    help="also time this many MiB on stdout (see the module); 0: not")
    args = ap.parse_args()
    if shutil.which("bwrap") is None:
        sys.exit("bwrap is not installed (Debian package bubblewrap)")
    with tempfile.TemporaryDirectory() as camp, declared(
            Declared(homes=(camp,) if args.campaign_files else ())):
        d = os.path.join(camp, "scratch", "c1-r1")
        os.makedirs(d)
        if args.campaign_files:
            walk_cost(camp, args.campaign_files)
        if args.stdout_mib:
            stdout_cost(d, args.stdout_mib, 3)

        def true(execs: list[str] | None = None) -> None:
            out = run_program(["true"], cwd=d, executables=execs)
            assert out.exit_code == 0, out.stderr

        def fio(execs: list[str] | None = None) -> None:
            out = run_program(["fio", "--name=b", "--ioengine=psync", "--rw=randread",
                               "--bs=4k", "--size=4M", "--runtime=1", "--time_based",
                               f"--directory={d}", "--output-format=json"], cwd=d,
                              executables=execs)
            assert out.exit_code == 0, out.stderr

        cases = [("true", true, args.repeats)]
        if shutil.which("fio") and args.fio_repeats:
            cases.append(("fio, 1 s", fio, args.fio_repeats))
        print(f"wall time per run, median of interleaved runs ({os.cpu_count()} CPUs, load "
              f"{os.getloadavg()[0]:.1f})")
        print(f"{'program':10} {'runs':>5} {'bare ms':>9} {'bwrap ms':>9} "
              f"{'overhead ms':>12} {'ratio':>7} {'+exec ms':>9} {'exec rules ms':>14}")
        for name, fn, n in cases:
            prog = [shutil.which(name.split(",")[0]) or name]
            # warm caches, the bwrap probe and the execute ruleset
            timed(fn, True), timed(fn, False), timed(lambda: fn(prog), True)
            bare, boxed, ruled = [], [], []
            for _ in range(n):
                boxed.append(timed(fn, True))
                bare.append(timed(fn, False))
                # the same walls with the execute rules (the program's own files only)
                ruled.append(timed(lambda: fn(prog), True))
            b, s = statistics.median(bare) * 1e3, statistics.median(boxed) * 1e3
            r = statistics.median(ruled) * 1e3
            print(f"{name:10} {n:5d} {b:9.1f} {s:9.1f} {s - b:12.1f} {s / b:6.2f}x "
                  f"{r:9.1f} {r - s:14.1f}")
        os.environ.pop(UNSANDBOXED_ENV, None)


if __name__ == "__main__":
    main()
