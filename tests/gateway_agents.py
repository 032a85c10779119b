"""Agents written with real client libraries, each as ``async def agent(base_url, api_key)``.

They are what a researcher brings to the gateway: the ``openai`` SDK's chat completions and
Responses, the OpenAI Agents SDK (its default Responses model and its chat completions model),
LangGraph's ReAct agent over ``langchain-openai``, and the ``anthropic`` SDK with thinking.
Each uses one tool, ``add``, returning ``tool_add``'s marker; ``ToolLoopPolicy`` counts them.
"""

from __future__ import annotations

import json
import warnings

import openai

from tests.gateway_helpers import tool_add

MODEL = "tir-policy"
ADD_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"},
                                               "b": {"type": "integer"}},
              "required": ["a", "b"]}
QUESTION = "Add the numbers, then answer."


TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add two integers.",
                                           "parameters": ADD_SCHEMA}}]


async def chat_agent(base_url: str, key: str, *, stream: bool = False,
                     keep_reasoning: bool = True, question: str = QUESTION) -> str:
    """A tool loop written with the openai SDK, as an agent author writes one."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
    messages: list[dict] = [{"role": "user", "content": question}]
    for _ in range(6):
        kwargs = dict(model="tir-policy", messages=messages, tools=TOOLS, temperature=0.2)
        if stream:
            msg = await _streamed(client, kwargs)
        else:
            msg = (await client.chat.completions.create(**kwargs)).choices[0].message
            msg = msg.model_dump(exclude_none=True)
        if not keep_reasoning:
            msg.pop("reasoning_content", None)
        messages.append(msg)
        if not msg.get("tool_calls"):
            return msg["content"]
        for call in msg["tool_calls"]:
            args = json.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": tool_add(**args)})
    raise AssertionError("the agent never answered")


async def _streamed(client: openai.AsyncOpenAI, kwargs: dict) -> dict:
    content, reasoning, calls = "", "", {}
    async for chunk in await client.chat.completions.create(stream=True, **kwargs):
        delta = chunk.choices[0].delta
        content += delta.content or ""
        reasoning += getattr(delta, "reasoning_content", None) or ""
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": "", "type": "function",
                                               "function": {"name": "", "arguments": ""}})
            slot["id"] += tc.id or ""
            slot["function"]["name"] += tc.function.name or ""
            slot["function"]["arguments"] += tc.function.arguments or ""
    msg: dict = {"role": "assistant", "content": content}
    if reasoning:
        msg["reasoning_content"] = reasoning
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
    return msg



async def openai_chat(base_url: str, api_key: str) -> str:
    return await chat_agent(base_url, api_key, stream=True)


async def openai_responses(base_url: str, api_key: str, stream: bool = True) -> str:
    """A Responses tool loop replaying the whole history (``store`` false, as Codex does)."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    tools = [{"type": "function", "name": "add", "description": "Add two integers.",
              "parameters": ADD_SCHEMA}]
    items: list = [{"role": "user", "content": QUESTION}]
    for _ in range(6):
        if stream:
            events = await client.responses.create(model=MODEL, input=items, tools=tools,
                                                   store=False, stream=True)
            response = None
            async for event in events:
                if event.type == "response.completed":
                    response = event.response
        else:
            response = await client.responses.create(model=MODEL, input=items, tools=tools,
                                                     store=False)
        items += [o.model_dump(exclude_none=True) for o in response.output]
        calls = [o for o in response.output if o.type == "function_call"]
        if not calls:
            return response.output_text
        for call in calls:
            items.append({"type": "function_call_output", "call_id": call.call_id,
                          "output": tool_add(**json.loads(call.arguments))})
    raise AssertionError("the agent never answered")


def _agents_tool():
    from agents import function_tool

    @function_tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return tool_add(a, b)
    return add


async def agents_sdk(base_url: str, api_key: str, chat_model: bool = False) -> str:
    """An OpenAI Agents SDK ``Runner`` with a function tool, on its default Responses model
    or on ``OpenAIChatCompletionsModel``."""
    from agents import (Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, RunConfig,
                        Runner, set_tracing_disabled)
    set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    cls = OpenAIChatCompletionsModel if chat_model else OpenAIResponsesModel
    agent = Agent(name="adder", instructions="Use the add tool.", tools=[_agents_tool()],
                  model=cls(model=MODEL, openai_client=client))
    result = await Runner.run(agent, QUESTION, max_turns=6,
                              run_config=RunConfig(tracing_disabled=True))
    return result.final_output


async def agents_sdk_chat(base_url: str, api_key: str) -> str:
    return await agents_sdk(base_url, api_key, chat_model=True)


async def langgraph_react(base_url: str, api_key: str) -> str:
    """LangGraph's prebuilt ReAct agent over ``langchain-openai``'s ``ChatOpenAI``."""
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        from langgraph.prebuilt import create_react_agent

    @tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return tool_add(a, b)
    model = ChatOpenAI(model=MODEL, base_url=base_url, api_key=api_key, max_retries=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(model, [add])
    state = await graph.ainvoke({"messages": [("user", QUESTION)]},
                                {"recursion_limit": 12})
    return state["messages"][-1].content


async def anthropic_sdk(base_url: str, api_key: str, stream: bool = True,
                        is_error: bool | None = None) -> str:
    """The ``anthropic`` SDK: tools and extended thinking, streamed, blocks sent back whole."""
    import anthropic
    client = anthropic.AsyncAnthropic(base_url=base_url.removesuffix("/v1"), api_key=api_key,
                                      max_retries=0)
    tools = [{"name": "add", "description": "Add two integers.", "input_schema": ADD_SCHEMA}]
    messages: list = [{"role": "user", "content": QUESTION}]
    kwargs = dict(model=MODEL, max_tokens=2048, tools=tools,
                  thinking={"type": "enabled", "budget_tokens": 1024})
    for _ in range(6):
        if stream:
            async with client.messages.stream(messages=messages, **kwargs) as events:
                reply = await events.get_final_message()
        else:
            reply = await client.messages.create(messages=messages, **kwargs)
        messages.append({"role": "assistant",
                         "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        uses = [b for b in reply.content if b.type == "tool_use"]
        if not uses:
            return "".join(b.text for b in reply.content if b.type == "text")
        flag = {} if is_error is None else {"is_error": is_error}  # the client's own claim
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": u.id, "content": tool_add(**u.input), **flag}
            for u in uses]})
    raise AssertionError("the agent never answered")


CLIENTS = {"openai-chat": openai_chat, "openai-responses": openai_responses,
           "agents-sdk": agents_sdk, "agents-sdk-chat": agents_sdk_chat,
           "langgraph": langgraph_react, "anthropic": anthropic_sdk}
