"""``python -m proofs_check`` is ``attneb verify``."""

import argparse
import sys

from .cli import add_verify_arguments, run_command

parser = argparse.ArgumentParser(prog="python -m proofs_check", description="Same as 'attneb verify'.")
add_verify_arguments(parser)
args = parser.parse_args()
sys.exit(run_command(args))
