"""The registered environments: thin wiring of prompt, format, tools and reward."""
