"""The `keras-elmo` command line: one module per subcommand, dispatched by `cli.main`."""
