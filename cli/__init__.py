"""The `keras-elmo` command line: one module per subcommand, dispatched by `keras_elmo.cli.main`."""
