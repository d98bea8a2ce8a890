"""Reports: pure plot functions and a self-contained HTML report."""
