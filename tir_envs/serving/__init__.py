"""Servers that put the project's tools and envs behind other ecosystems' protocols: the tools
over MCP (``mcp_server``), any env over OpenEnv (``openenv_server``)."""
