"""What the data leave uncertain: the one bootstrap (``bootstrap``, ``resampling``, ``resample_check``), intervals on
predictions (``intervals``, ``fitted``), the interval arithmetic every fit and decision shares (``from_draws``:
percentile and bias-corrected intervals, unusable-resample counts, the run bootstrap of decisions), identifiability
(``identify``) and loose-parameter profiles (``profile``).
"""
