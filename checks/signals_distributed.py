"""The distributed signals, registered once (see checks/registry.py)."""
