"""Pure builders: Kubernetes objects (plain dicts) from a ClusterSpec. No API calls, no clock."""
