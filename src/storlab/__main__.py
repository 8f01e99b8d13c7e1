"""`python -m storlab`: the same program as the `storlab` script (for a venv whose scripts
directory is not on PATH, or `python3.11 -m storlab` on a machine with several Pythons).
`python -m` puts the working directory first on sys.path; the package face
(storlab/__init__.py), which runs before this file, drops it before any other import.
The installed `storlab` script, or `python -P -m storlab`, never adds it."""

from storlab.cli import main

if __name__ == "__main__":
    main()
