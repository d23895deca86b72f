"""The base class of bmpipe's exceptions (here so the C++ module can derive from it)."""


class Error(Exception):
    """Base class of bmpipe's errors."""


class Note(UserWarning):
    """What the command line prints as "bmpipe: note: ...": an old key name read, a launcher flag
    that does not change the plan, a missing section that limits the checks."""


Error.__module__ = "bmpipe.errors"
Note.__module__ = "bmpipe.errors"
