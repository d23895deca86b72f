"""The exceptions bmpipe raises. Their messages are the command line's: they name the field, the
value and the fix. Each matches one of the command line's exit codes (docs/python.md):

- InvalidInputError (exit 2): bad input, a bad argument or an invalid file;
- FileError (3): a file could not be read or written;
- NoFitError (4): proven, no plan fits in memory (the message says what would help);
- NoPlanError (5): a limit stopped the search before any plan was found;
- TooLargeError (6): the work does not fit in the memory available;
- InternalError (1): a bug in bmpipe.

Notes (the command line's "bmpipe: note: ...") are warnings of the category Note.
"""
from bmpipe._errorbase import Error, Note
from bmpipe._core import (
    FileError,
    InternalError,
    InvalidInputError,
    NoFitError,
    NoPlanError,
    TooLargeError,
)

__all__ = [
    "Error",
    "InvalidInputError",
    "FileError",
    "NoFitError",
    "NoPlanError",
    "TooLargeError",
    "InternalError",
    "Note",
]
