"""`python -m lakeoperator`: the operator (the same as `weir operator`)."""

from lakeoperator.main import main

main()
