"""``python -m murmur_nb``: the ``murmur-nb`` command, for an environment whose scripts folder
is not on ``PATH`` (a kernel's venv, ``!python -m murmur_nb check ./my-module`` in a cell)."""

import sys

from murmur_nb._checker.cli import main

if __name__ == "__main__":
    sys.exit(main())
