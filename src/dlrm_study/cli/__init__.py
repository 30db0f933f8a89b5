"""The command line: `dlrm-study` (`main`: parsing only); a GPU lending's session is `lending.gpu_session`."""
