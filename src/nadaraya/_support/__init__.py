"""Plumbing every wing shares: validation, configuration, threads, files, jit helpers."""
