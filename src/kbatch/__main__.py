"""`python -m kbatch ...`: the `kbatch` command line (`python -m kbatch --version` works without the
cli extra)."""
import sys

from .cli import main

sys.exit(main())
