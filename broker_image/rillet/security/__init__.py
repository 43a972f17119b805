"""Security of the listeners: TLS (tls.py)."""
