"""Every line of Dask: the lazy backend, lazy pooling and local fits, the Dask fit, rules of thumb.

Importing this package does not import Dask; its modules do.
"""
