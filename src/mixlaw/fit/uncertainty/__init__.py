"""What the data leave uncertain: the one bootstrap (``bootstrap``, ``resampling``, ``resample_check``), intervals on
predictions (``intervals``, ``fitted``), identifiability (``identify``) and loose-parameter profiles (``profile``).
"""
