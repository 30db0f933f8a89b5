"""A GPU lending's logistics, in one place: its plan and budget, its phases, the pairs a session counts, and the
session itself (`gpu_session`, what scripts/gpu_lending.sh and scripts/gpu_check.sh run on the lent machine)."""
