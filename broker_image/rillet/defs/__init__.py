"""Definitions the broker and the operator share: broker and topic config definitions (names,
kinds, defaults, checks, parsing and rendering, the loaded and checked BrokerConfig), the
dynamic broker keys, the cluster id format, TLS settings and certificate subject names, SASL
mechanism names and the ACL binding.

Pure: these modules import the standard library and each other only, never the broker's
runtime (tests/unit/test_layering.py holds them to it), so the operator and its image need
nothing else of the broker. Nothing is re-exported here: import from the module that defines
a name.
"""
