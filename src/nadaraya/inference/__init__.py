"""Inference on fitted models: prediction intervals and average marginal effects."""
