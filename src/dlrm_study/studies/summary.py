"""The claim ledger's names in one place, for callers of the time before it was split: the rules
(`studies.verdicts`), the evidence (`studies.evidence`) and the README section (`studies.ledger`)."""

from dlrm_study.studies.evidence import H1_KNOBS, Evidence, primary_machine
from dlrm_study.studies.ledger import MARK_BEGIN, MARK_END, NOTEBOOKS, ledger, readme_section, write_readme
from dlrm_study.studies.verdicts import CLAIMS, RULES, S1_FACTOR, S2_SHARE, S3_FACTOR, Verdict, judge, verdicts

__all__ = [
    "CLAIMS",
    "H1_KNOBS",
    "MARK_BEGIN",
    "MARK_END",
    "NOTEBOOKS",
    "RULES",
    "S1_FACTOR",
    "S2_SHARE",
    "S3_FACTOR",
    "Evidence",
    "Verdict",
    "judge",
    "ledger",
    "primary_machine",
    "readme_section",
    "verdicts",
    "write_readme",
]
