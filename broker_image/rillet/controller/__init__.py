"""The active controller: decides metadata changes as records, then commits them."""
