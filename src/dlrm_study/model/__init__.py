"""The model: DLRM (`dlrm`), its interactions (`interaction`), sparse archs (`tables`), kernels (`kernels`),
the MLP layers fused on oneDNN (`fused_mlp`)."""
