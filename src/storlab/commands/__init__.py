"""CLI command groups. Every module here with a `register(app)` function is added to the
`storlab` command by `storlab.cli`; each stays thin: parse, call the library, print."""
