import sys

from quicbed.cli import main

sys.exit(main())
