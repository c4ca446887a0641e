"""The `weir` command line."""
