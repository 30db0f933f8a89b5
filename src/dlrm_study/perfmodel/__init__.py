"""Performance models: the roofline bound of one step (`roofline`), the GPU model (`gpu`), the scaling model (`scaling`)."""
