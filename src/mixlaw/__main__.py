"""``python -m mixlaw``: the ``mixlaw`` command line."""

from mixlaw.cli import main

main()
