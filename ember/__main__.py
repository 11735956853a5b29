"""`python -m ember ...`: see ember/cli."""
import sys

from ember.cli import main

sys.exit(main())
