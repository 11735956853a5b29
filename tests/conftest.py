import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # for `from helpers import ...`
sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))  # for `from benchmarks import ...`
