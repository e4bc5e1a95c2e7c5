"""Run the ``nadaraya`` command: ``python -m nadaraya``."""

from .cli import main

if __name__ == "__main__":
    main()
