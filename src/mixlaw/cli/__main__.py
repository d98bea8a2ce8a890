"""``python -m mixlaw.cli``."""

from mixlaw.cli import main

main()
