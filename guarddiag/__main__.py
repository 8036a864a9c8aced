import sys

from guarddiag.cli import main

sys.exit(main())
