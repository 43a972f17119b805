"""The rillet Kubernetes operator (Kopf): Cluster and Topic custom resources."""
