"""Performance models: the roofline bound of a step (`roofline`) and its split by operator (`operator_bounds`),
the GPU model (`gpu`), scaling (`scaling`)."""
