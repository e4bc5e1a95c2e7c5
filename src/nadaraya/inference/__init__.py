"""Inference on fitted models: prediction intervals and average marginal effects (more arrives with the house move)."""
