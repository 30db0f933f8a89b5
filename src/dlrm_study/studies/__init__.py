"""How each notebook's plan (`dlrm_study.plans`) is measured: one module per notebook family.

`runs` (every run a process: `make reproduce`), `compare` (notebooks 01, 02), `baseline` (02's 2020 step),
`sensitivity` (03, 04 and their GPU mirrors), `placement` (05), `scaling` (06), `convergence` and
`bf16_rounding` (07). A GPU lending's logistics are `lending`'s; reading what they recorded is `analysis`'s.
"""
