"""Checking a fit on data it did not see: held-out validation (``validate``), the extrapolation calibration
(``calibrate``, ``calib_*``), coverage (``coverage``) and extrapolation distance (``extrapolation``).
"""
