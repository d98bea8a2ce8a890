"""Solving: the batched damped Gauss-Newton solver (``solve``, ``steps``), iteration limits (``refine``), thread pools
(``pools``), batched refits under the usable-row rule (``refits``) and many fits in one solve (``batch``).
"""
