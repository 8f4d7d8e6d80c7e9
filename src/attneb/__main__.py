"""``python -m attneb`` is the ``attneb`` command."""

import sys

from attneb.proofs_check.cli import main

sys.exit(main())
