"""What runs a plan that is not a primitive: MCP tools, directives and threads."""
