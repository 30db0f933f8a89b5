"""What readers see: figures (`plots`), the README's ledger (`ledger`), what a notebook says of itself
(`session`), the facts nbval checks (`checks`)."""
