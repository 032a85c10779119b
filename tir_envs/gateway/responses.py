async def handle(gw, episode, body, request):
    raise NotImplementedError
