"""Kopf handlers: thin I/O around the pure builders and plans (registered in rillet_operator.main)."""
