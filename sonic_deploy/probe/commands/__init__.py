"""One module per `probe` subcommand: its options and its run (`probe turn`'s are in sonic_deploy/turn/; the
options the routes share, in probe/arguments.py)."""
