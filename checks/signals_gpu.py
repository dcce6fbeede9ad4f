"""The gpu signals, registered once (see checks/registry.py)."""
