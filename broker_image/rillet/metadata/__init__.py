"""Cluster metadata: records of the metadata log and the image rebuilt from them."""
