import sys

from bench.peers.cli import main

sys.exit(main())
