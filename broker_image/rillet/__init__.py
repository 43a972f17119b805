"""rillet: a Kafka-API-compatible broker."""
__version__ = "0.1.0"
