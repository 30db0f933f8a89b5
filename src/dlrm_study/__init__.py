"""dlrm-study: DLRM training efficiency on CPUs and GPUs, measured."""

__version__ = "0.1.0"
