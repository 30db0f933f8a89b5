"""The model: DLRM (`dlrm`), its interactions (`interaction`), sparse archs (`tables`), kernels (`kernels`)."""
