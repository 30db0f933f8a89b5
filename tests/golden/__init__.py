"""The golden judgements: a committed fixture of records that reaches every status of every claim, and what
today's rules decide on it (`dlrm_study.rules`: the rules' id is the digest of the declared literals and of
these judgements)."""
