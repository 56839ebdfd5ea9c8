"""``python -m attnrmt``: the ``attnrmt`` command (:func:`attnrmt.cli.main`)."""

import sys

from attnrmt.cli import main

if __name__ == "__main__":
    sys.exit(main())
