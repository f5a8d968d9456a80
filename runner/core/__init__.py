"""The data a run is made of: the plan, references, parameters, ${VAR} expansion,
records and tool directories; no I/O to the registry or processes."""
