"""The `bmpipe` command installed with the package: the same C++ program as build/bmpipe."""
import os
import sys
from pathlib import Path


def executable() -> str:
    """The path of the command-line program shipped inside the package."""
    return str(Path(__file__).resolve().parent / "bin" / "bmpipe")


def main() -> None:
    program = executable()
    os.execv(program, [program] + sys.argv[1:])
