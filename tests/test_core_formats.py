"""Tool-call formats: exact parsing on the cases models produce, and never raising."""

from hypothesis import given, settings, strategies as st

from tir_envs.formats import JsonFormat, MarkdownFormat, TagsFormat, get_format

ALL = [MarkdownFormat(), MarkdownFormat(stop=["```python", "```"]), TagsFormat(), JsonFormat()]
FRAGMENTS = ["```python\n", "```", "```output", "\n", "<python>", "</python>", "<code>",
             "<search>", "</search>", "<result>", "<tool_call>", "</tool_call>", "{", "}",
             '"name"', ":", '"arguments"', "print(1)", " ", "\\boxed{3}", "<sql>", "</sql>"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=30))
def test_parsers_never_raise_and_spans_are_exact(pieces):
    text = "".join(pieces)
    for fmt in ALL:
        for call in fmt.parse(text):
            assert text[call.start:call.end] == call.raw
            assert call.error is not None or isinstance(call.arguments, dict)
        fmt.render_observation(fmt.parse(text), ["x"] * len(fmt.parse(text)), text)


def test_markdown_several_blocks_and_hallucinated_output_ignored():
    text = ("Try.\n```python\nx = 2\n```\nand\n```python\nprint(x + 1)\n```\n```output\n"
            "3\n```\n```python\nprint('after the stop')\n```")
    calls = MarkdownFormat().parse(text)
    assert [c.arguments["code"] for c in calls] == ["x = 2", "print(x + 1)"]
    assert all(c.name == "python" for c in calls)


def test_markdown_unterminated_block_is_not_a_call():
    assert MarkdownFormat().parse("```python\nprint(1)\n") == []


def test_markdown_observation_continues_a_kept_stop_string():
    fmt = MarkdownFormat()
    action = "```python\nprint(3)\n```\n```output"
    call = fmt.parse(action)
    assert fmt.render_observation(call, ["3\n"], action) == "\n3\n```\n"
    assert fmt.render_observation(call, ["3"], "```python\nprint(3)\n```") == "```output\n3\n```\n"


def test_tags_calls_for_several_tools_and_results_ignored():
    fmt = TagsFormat()
    text = ("<search>who wrote Hamlet</search> then <python>\nprint(1)\n</python> "
            "<sql>SELECT 1</sql><result>fake</result><python>print(2)</python>")
    calls = fmt.parse(text)
    assert [(c.name, c.arguments) for c in calls] == [
        ("search", {"query": "who wrote Hamlet"}), ("python", {"code": "print(1)"}),
        ("sql", {"query": "SELECT 1"})]
    assert fmt.render_result(calls[0], "Doc 1") == "\n<information>\nDoc 1\n</information>\n"
    assert "</search>" in fmt.stop_sequences and "</python>" in fmt.stop_sequences


def test_tags_restricted_to_tools():
    fmt = TagsFormat(tools=["search"])
    assert fmt.stop_sequences == ["</search>"]
    assert fmt.parse("<python>x</python>") == []


def test_json_calls_good_bad_and_string_arguments():
    fmt = JsonFormat()
    text = ('<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>'
            '<tool_call>{"name": "python", "arguments": {"code": </tool_call>'
            '<tool_call>{"name": "answer", "arguments": "{\\"answer\\": \\"7\\"}"}</tool_call>'
            '<tool_call>[1, 2]</tool_call><tool_call>{"arguments": {}}</tool_call>'
            '<tool_call>{"name": "x", "arguments": 3}</tool_call><tool_call>{"name": "p"')
    calls = fmt.parse(text)
    assert len(calls) == 6
    assert (calls[0].name, calls[0].arguments, calls[0].error) == ("python", {"code": "print(1)"}, None)
    assert calls[1].error.startswith("invalid JSON")
    assert (calls[2].name, calls[2].arguments) == ("answer", {"answer": "7"})
    assert "JSON object" in calls[3].error
    assert "name" in calls[4].error
    assert "arguments" in calls[5].error


def test_get_format_rejects_unknown_names():
    import pytest
    with pytest.raises(ValueError, match="markdown"):
        get_format("yaml")
