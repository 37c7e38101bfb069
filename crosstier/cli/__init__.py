"""The `ctc` command line: one module per command group, on top of everything else.
Nothing in the project imports this package; the console script does."""
