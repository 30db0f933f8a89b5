"""What each notebook measures, per profile: one module per notebook family.

`profiles` (how much every study measures), `cpu` and `compare` (notebooks 01, 02), `baseline`
(02's 2020 step), `sensitivity` (03, 04 and their GPU mirrors), `placement` (05), `scaling` (06),
`convergence` (07), `gpu` (the GPU session's plan). Reading what they recorded is `analysis`'s.
"""
