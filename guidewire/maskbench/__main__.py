"""``python -m guidewire.maskbench``: run the MaskBench comparison from the command line."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m guidewire.maskbench"))
