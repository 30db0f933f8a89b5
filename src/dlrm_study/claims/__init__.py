"""The claims of the two papers, one module each (`h1` .. `h4` of HPCA 2021, `s1` .. `s4` of SC20): its rule over
the declared literals (src/dlrm_study/rules/rules.toml), its deciding pairs, its words, how a reader sees its
numbers, and the design of runs that feeds it (`DESIGNS`). `rule` holds what every rule shares, `claim` the
`Claim` type, `grid` what H2 and H3 share, `registry` the list every page reads and `designs` the designs'
powers. docs/claims.md states each rule in words.
"""
