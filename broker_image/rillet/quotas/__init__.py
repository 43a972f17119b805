"""Client quotas (KIP-13/55/124/546): entities and precedence, the rate measure, the
controllers decisions and the brokers enforcement."""
