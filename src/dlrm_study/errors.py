"""The two exception types the CLI ends in one line and exit 2: bad input (`UsageError`) and a fault (`Fault`)."""


class UsageError(Exception):
    """Bad input: a config, an option, a file. The CLI prints it in one line and exits 2."""


class Fault(Exception):
    """The machine failed the run, not its input: a disk full, a folder gone, a kernel build held too long.

    The CLI prints it in one line and exits 2, like a UsageError; unlike one, a study never records it as a
    measurement's error (`measure.runner`): the same measurement would succeed on a sound machine.
    """
