"""The command line: `dlrm-study` (`main`: parsing only) and the GPU session (`gpu_session`)."""
