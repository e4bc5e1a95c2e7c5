"""Inference on fitted models beyond the exact sums: nprobust's robust variances and bias-corrected bands."""
