"""Reading records: statistics (`stats`), the evidence per claim and its verdicts, findings, predictions,
each operator against its bound (`operators`)."""
