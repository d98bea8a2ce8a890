"""The fit problem: validated data and residuals (``data``), derived features (``features``), the start design
(``starts``).
"""
