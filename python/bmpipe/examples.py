"""Problems that ship with bmpipe."""
from bmpipe._api import Problem
from bmpipe import _core


def mindformers_demo() -> Problem:
    """The MindFormers pipeline-balance tool's demo (96 decoder layers, 16 stages, 16 micro-batches,
    56 GB devices): the command line's built-in example. Its proven optimum is 54.81 s."""
    return Problem(_core.builtin_example())
