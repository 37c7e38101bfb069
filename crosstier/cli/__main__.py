"""`python -m crosstier.cli ...` is `ctc ...`."""

import sys

from crosstier.cli.main import main

sys.exit(main())
