"""Performance models: the roofline bound of a step (`roofline`), the GPU model (`gpu`), scaling (`scaling`)."""
