"""A home's configuration: where things live (`GOODPUT_HOME`), service.yaml, threshold overrides and the
peak FLOPs table, each a validated model with a one-line error naming its file."""
