"""`python -m storlab`: the same program as the `storlab` script (for a venv whose scripts
directory is not on PATH, or `python3.11 -m storlab` on a machine with several Pythons)."""

from storlab.cli import main

if __name__ == "__main__":
    main()
