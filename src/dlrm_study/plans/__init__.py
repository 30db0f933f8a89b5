"""Plans as data: what every study measures, per profile, and nothing of how.

`profiles` (how much every study measures), `sweep` (a sweep's points and variants), `cpu` (notebooks 01, 02),
`sensitivity` (03, 04 and their GPU mirrors), `placement` (05), `scaling` (06), `convergence` and
`bf16_rounding` (07), `baseline` (02's 2020 step), `gpu` and `gpu_targets` (the GPU session's grid). They import
config, the declared rules and three ground-floor helpers (errors; platform: what this CPU runs natively; records'
file checks), never a loop, a measurement or a reader (tests/test_layout.py): `studies` measures these plans and
`analysis` reads their records by them.
"""
