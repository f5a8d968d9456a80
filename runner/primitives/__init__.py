"""The only two pieces of code that run tools: the subprocess and http_client primitives."""
