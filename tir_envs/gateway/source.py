class AgentSource:
    pass
