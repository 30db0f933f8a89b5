"""The model: DLRM (`dlrm`), its interactions (`interaction`), its sparse archs (`tables`) and their kernels (`kernels`)."""
