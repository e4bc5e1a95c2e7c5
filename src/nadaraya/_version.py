"""The version of nadaraya, readable without importing the package face (support layer)."""

__version__ = "0.1.0"
