import sys

from bench.netem.cli import main

sys.exit(main())
