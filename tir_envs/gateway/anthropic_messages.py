async def handle(gw, episode, body, request):
    raise NotImplementedError
async def count_tokens(gw, episode, body, request):
    raise NotImplementedError
