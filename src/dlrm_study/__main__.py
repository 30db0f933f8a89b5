"""`python -m dlrm_study` is `dlrm-study`."""

import sys

from dlrm_study.cli.main import main

sys.exit(main())
