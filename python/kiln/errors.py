"""errors.py — what the kiln package raises: one message, naming the culprit."""


class KilnError(Exception):
    """Base of every error the package raises."""


class InputError(KilnError, ValueError):
    """Something the caller gave is wrong: a file that is not an artifact of
    this machine, an array of the wrong shape or dtype, an input name the
    model does not have, a thread count, an option of kiln compile."""


class RunError(KilnError, RuntimeError):
    """A run failed inside the artifact (its P_last_error says why, e.g. no
    GPU driver), or the kiln command could not be run or failed."""
