"""Local fits with nearest-neighbour spans: :func:`nadaraya.lowess` lives in :mod:`.lowess`."""
