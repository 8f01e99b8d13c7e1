"""CLI command groups. Every module here with a `register(app)` function is added to the
`storlab` command by `storlab.cli` (list its commands in `cli.COMMAND_MODULES`, so that
`storlab NAME` imports only NAME's module); each stays thin: parse, call the library,
print."""
