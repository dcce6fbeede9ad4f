"""The training signals, registered once (see checks/registry.py)."""
