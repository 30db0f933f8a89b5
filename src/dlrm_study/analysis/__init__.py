"""Reading records: statistics (`stats`), the evidence per claim and its verdicts, findings, predictions."""
