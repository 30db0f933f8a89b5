"""The one exception type that means "the user asked for something wrong"."""


class UsageError(Exception):
    """Bad input: a config, an option, a file. The CLI prints it in one line and exits 2."""
