"""`python -m kbatch.cli ...`: the same as the `kbatch` command."""
import sys

from . import main

sys.exit(main())
