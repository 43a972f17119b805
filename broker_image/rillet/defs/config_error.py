"""ConfigError: a setting that cannot be served as given; its text names the key and why.

Its own module so that what broker_config.py loads with (listeners, their TLS and SASL checks)
can raise it without importing broker_config.py back."""


class ConfigError(ValueError):
    pass
