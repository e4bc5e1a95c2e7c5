"""Run the ``nadaraya`` command: ``python -m nadaraya``."""

from nadaraya.cli import main

if __name__ == "__main__":
    main()
