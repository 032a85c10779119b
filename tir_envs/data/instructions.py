"""Verifiable instruction-following training prompts, generated from templates.

IFEval's 541 prompts are an evaluation set, so training needs prompts of its own: a writing
task (topics below) plus one to three instructions drawn from IFEval's 25 instruction types,
each phrased by our own templates with sampled parameters (counts, relations, keywords,
languages, markers).  Every prompt carries ``instruction_id_list`` and ``kwargs`` that
``tir_envs.rewards.ifeval`` checks, so the reward is exact.  Generation is a pure function of
the seed.  Instructions that cannot hold together (all capitals and all lowercase, JSON output
and a postscript, repeating the request and writing in Swahili, ...) are never combined.
Generated prompts never equal an IFEval prompt (checked here) and share no long word sequence
with one (checked by tests/test_instructions.py).

``generate_instruction_tasks(n, seed)`` returns ``Task``s with ``meta["domain"] =
"instruction"`` and ``meta["tool"] = None`` (any tool, or none, is a fair choice), ids
``ifgen-<seed>-<i>``.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from tir_envs.data.ifeval.arguments import INSTRUCTION_IDS, validate_kwargs
from tir_envs.task import Task

DOMAIN = "instruction"

TOPICS = (
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Describe a day in the life of a beekeeper in the mountains.",
    "Explain how a refrigerator keeps food cold to a curious ten-year-old.",
    "Write a product description for a backpack with a built-in solar panel.",
    "Give advice to a student who is about to start learning the violin.",
    "Write a letter from a city mayor announcing a new public library.",
    "Describe the rules of a board game you invent about trading spices.",
    "Write a review of a fictional restaurant that only serves soup.",
    "Explain why the sky looks orange at sunset.",
    "Write a speech for the opening of a community garden.",
    "Describe the journey of a raindrop from a cloud to the ocean.",
    "Write a travel guide entry for a small island known for its lighthouses.",
    "Explain the difference between weather and climate.",
    "Write a diary entry of an astronaut on her first night in orbit.",
    "Propose a plan to reduce food waste in a school cafeteria.",
    "Write a cover letter for a junior position at a bicycle repair shop.",
    "Describe how bread rises and why yeast matters.",
    "Write a fable about a tortoise who wants to learn to fly.",
    "Explain how a bill becomes a law to a new citizen.",
    "Write an advertisement for a museum of forgotten inventions.",
    "Summarize the benefits of walking thirty minutes a day.",
    "Write a short biography of an imaginary chess champion from the 1920s.",
    "Describe the sounds of a busy train station at rush hour.",
    "Explain why bridges are built with expansion joints.",
    "Write a thank-you note to a neighbor who fixed your fence.",
    "Give tips for keeping houseplants alive during winter.",
    "Write a news report about a town that won a kite-flying contest.",
    "Describe an ideal weekend for someone who loves astronomy.",
    "Explain how vaccines train the immune system.",
    "Write a pitch for a mobile app that helps people swap books.",
    "Describe the history of the bicycle in a few key moments.",
    "Write a lullaby for a baby elephant.",
    "Explain how compound interest works with a simple example.",
    "Write instructions for brewing a good cup of tea.",
    "Describe a festival in a village famous for its lanterns.",
    "Write a complaint to an airline about a lost suitcase full of maps.",
    "Explain why cats purr, as far as scientists know.",
    "Write a motivational message for a team before a robotics competition.",
    "Describe how a honeybee colony decides where to build a new hive.",
    "Write a short mystery in which the clue is a missing umbrella.",
    "Explain what a volcano is and why some are dormant.",
    "Write an invitation to a retirement party for a school janitor.",
    "Describe the perfect reading nook.",
    "Explain how to prepare for a job interview at a hospital.",
    "Write a poem about the first snow of the year.",
    "Describe the life cycle of a monarch butterfly.",
    "Write a blog post about learning to cook at the age of sixty.",
    "Explain how noise-cancelling headphones work.",
    "Write a dialogue between a river and a mountain.",
    "Give a packing list for a week-long canoe trip.",
    "Describe the architecture of an imaginary underwater city.",
    "Write a proposal to add a bicycle lane to a busy street.",
    "Explain why recycling aluminum saves energy.",
    "Write a farewell message to a colleague moving to another country.",
    "Describe what makes a good team captain.",
    "Write a short essay on the value of public parks.",
    "Explain how tides are connected to the moon.",
    "Write a recipe for a vegetable soup for a cold evening.",
    "Describe a market day in a desert town.",
    "Write a pep talk for someone running their first marathon.",
    "Explain how a compass finds north.",
    "Write a children's story about a robot who is afraid of the dark.",
    "Describe the smell and taste of a ripe mango to someone who has never had one.",
    "Write a brief history of the postal service in a fictional kingdom.",
    "Explain why it is important to sleep well before an exam.",
    "Write an announcement for a neighborhood clean-up day.",
    "Describe a quiet morning at a fishing harbor.",
    "Explain how photosynthesis turns light into food for plants.",
    "Write a product review of a pair of waterproof hiking boots.",
    "Describe the training of a guide dog.",
)

#: yes/no questions for ``detectable_format:constrained_response``
YES_NO_QUESTIONS = (
    "Is it a good idea to learn a second language as an adult?",
    "Should every city have free public transport?",
    "Is it worth repairing an old bicycle instead of buying a new one?",
    "Can a small garden make a difference for local bees?",
    "Should schools teach cooking as a required subject?",
    "Is reading on paper better for memory than reading on a screen?",
    "Would a four-day school week help students learn?",
    "Is it wise to take a gap year before university?",
)

KEYWORDS = ("harbor", "lantern", "journey", "silence", "copper", "meadow", "compass", "thunder",
            "orchard", "velvet", "horizon", "anchor", "whistle", "granite", "ember", "puzzle",
            "canvas", "breeze", "ladder", "riddle", "marble", "feather", "voyage", "crystal")
FORBIDDEN = ("very", "really", "thing", "good", "bad", "nice", "just", "basically", "amazing",
             "important", "actually", "stuff")
END_PHRASES = ("Thank you for reading.", "That is all for today.", "Let me know what you think.",
               "Until next time!", "Does this answer your question?", "Enjoy the journey.")
#: languages whose sentences end in ``.``/``?``/``!``, so sentence counts still mean something
LANGUAGES = {"fr": "French", "de": "German", "es": "Spanish", "it": "Italian",
             "pt": "Portuguese", "ru": "Russian", "ko": "Korean", "sw": "Swahili",
             "vi": "Vietnamese", "fi": "Finnish", "tr": "Turkish", "nl": "Dutch", "pl": "Polish"}
SECTION_WORDS = ("Section", "SECTION", "Part", "PART", "Chapter", "Step")
FIRST_WORDS = ("first", "today", "imagine", "however", "finally", "meanwhile", "suddenly",
               "often", "yesterday", "honestly")
LETTERS = "abcdefghijklmnoprstuwy"

_Rendered = tuple[str, dict[str, Any]]
Template = Callable[[random.Random], _Rendered]


def _relation(rng: random.Random) -> str:
    return rng.choice(("at least", "less than"))


def _phrase_relation(relation: str) -> str:
    return "at least" if relation == "at least" else "fewer than"


def _keywords_existence(rng: random.Random) -> _Rendered:
    words = rng.sample(KEYWORDS, 2)
    return (f"Make sure the words \"{words[0]}\" and \"{words[1]}\" both appear in your answer.",
            {"keywords": words})


def _keywords_frequency(rng: random.Random) -> _Rendered:
    word, relation = rng.choice(KEYWORDS), _relation(rng)
    n = rng.randint(2, 4) if relation == "at least" else rng.randint(1, 3)
    return (f"The word \"{word}\" should show up {_phrase_relation(relation)} {n} "
            f"time{'s' if n > 1 else ''}.", {"keyword": word, "frequency": n, "relation": relation})


def _forbidden_words(rng: random.Random) -> _Rendered:
    words = rng.sample(FORBIDDEN, rng.randint(2, 3))
    listed = ", ".join(f"\"{w}\"" for w in words[:-1]) + f" or \"{words[-1]}\""
    return f"Avoid the words {listed} entirely.", {"forbidden_words": words}


def _letter_frequency(rng: random.Random) -> _Rendered:
    letter, relation = rng.choice(LETTERS), _relation(rng)
    n = rng.randint(3, 12) if relation == "at least" else rng.randint(20, 60)
    return (f"Let the letter \"{letter}\" appear {_phrase_relation(relation)} {n} times in your "
            "reply.", {"letter": letter, "let_frequency": n, "let_relation": relation})


def _response_language(rng: random.Random) -> _Rendered:
    code = rng.choice(sorted(LANGUAGES))
    return (f"Reply only in {LANGUAGES[code]}; do not use any other language.",
            {"language": code})


def _number_sentences(rng: random.Random) -> _Rendered:
    relation = _relation(rng)
    n = rng.randint(3, 12) if relation == "at least" else rng.randint(4, 15)
    return (f"Your reply should have {_phrase_relation(relation)} {n} sentences.",
            {"num_sentences": n, "relation": relation})


def _number_paragraphs(rng: random.Random) -> _Rendered:
    n = rng.randint(2, 5)
    return (f"Organize the reply as {n} paragraphs, putting the markdown divider *** between "
            "consecutive paragraphs.", {"num_paragraphs": n})


def _number_words(rng: random.Random) -> _Rendered:
    relation = _relation(rng)
    n = rng.choice((50, 80, 120, 150, 200, 250)) if relation == "at least" \
        else rng.choice((60, 100, 150, 200, 300))
    return (f"Keep the length to {_phrase_relation(relation)} {n} words.",
            {"num_words": n, "relation": relation})


def _nth_paragraph_first_word(rng: random.Random) -> _Rendered:
    n = rng.randint(2, 5)
    k = rng.randint(1, n)
    word = rng.choice(FIRST_WORDS)
    return (f"Write {n} paragraphs separated from each other by a blank line (two newlines), "
            f"and begin paragraph number {k} with the word \"{word}\".",
            {"num_paragraphs": n, "nth_paragraph": k, "first_word": word})


def _number_placeholders(rng: random.Random) -> _Rendered:
    n = rng.randint(1, 6)
    return (f"Leave {n} or more placeholders in square brackets, for instance [city], for the "
            "reader to fill in.", {"num_placeholders": n})


def _postscript(rng: random.Random) -> _Rendered:
    marker = rng.choice(("P.S.", "P.P.S"))
    return (f"Close with a postscript that begins with {marker}", {"postscript_marker": marker})


def _number_bullet_lists(rng: random.Random) -> _Rendered:
    n = rng.randint(2, 7)
    return (f"Present the content as exactly {n} markdown bullet points, each line starting "
            "with \"* \".", {"num_bullets": n})


def _constrained_response(rng: random.Random) -> _Rendered:
    return ("Reply with exactly one of these: \"My answer is yes.\", \"My answer is no.\", "
            "\"My answer is maybe.\"", {})


def _number_highlighted_sections(rng: random.Random) -> _Rendered:
    n = rng.randint(1, 5)
    return (f"Emphasize {n} or more parts using markdown italics, like *this part*.",
            {"num_highlights": n})


def _multiple_sections(rng: random.Random) -> _Rendered:
    word, n = rng.choice(SECTION_WORDS), rng.randint(2, 5)
    return (f"Split your reply into {n} sections, opening each with \"{word} N\" where N is the "
            "section number.", {"section_spliter": word, "num_sections": n})


def _json_format(rng: random.Random) -> _Rendered:
    return "Format the whole output as valid JSON (a markdown code fence is fine).", {}


def _title(rng: random.Random) -> _Rendered:
    return "Put a title at the top inside double angle brackets, for example <<my title>>.", {}


def _two_responses(rng: random.Random) -> _Rendered:
    return ("Offer two distinct versions of the answer and separate them with a line of six "
            "asterisks: ******", {})


def _end_checker(rng: random.Random) -> _Rendered:
    phrase = rng.choice(END_PHRASES)
    return (f"The very last words of your reply must be \"{phrase}\" with nothing after them.",
            {"end_phrase": phrase})


def _capital_word_frequency(rng: random.Random) -> _Rendered:
    relation = _relation(rng)
    n = rng.randint(2, 8) if relation == "at least" else rng.randint(2, 5)
    return (f"Use {_phrase_relation(relation)} {n} fully capitalized words (LIKE THIS).",
            {"capital_frequency": n, "capital_relation": relation})


def _english_capital(rng: random.Random) -> _Rendered:
    return "Write the reply in English using capital letters only.", {}


def _english_lowercase(rng: random.Random) -> _Rendered:
    return "Write the reply in English using lowercase letters only, with no capitals at all.", {}


def _no_comma(rng: random.Random) -> _Rendered:
    return "Do not put a single comma anywhere in the reply.", {}


def _quotation(rng: random.Random) -> _Rendered:
    return "Enclose the entire reply in double quotation marks.", {}


REPEAT_SENTENCE = ("Before answering, copy out the request above exactly as written (leave out "
                   "this sentence and write nothing before the copy), then give your answer.")

TEMPLATES: dict[str, Template | None] = {
    "keywords:existence": _keywords_existence,
    "keywords:frequency": _keywords_frequency,
    "keywords:forbidden_words": _forbidden_words,
    "keywords:letter_frequency": _letter_frequency,
    "language:response_language": _response_language,
    "length_constraints:number_sentences": _number_sentences,
    "length_constraints:number_paragraphs": _number_paragraphs,
    "length_constraints:number_words": _number_words,
    "length_constraints:nth_paragraph_first_word": _nth_paragraph_first_word,
    "detectable_content:number_placeholders": _number_placeholders,
    "detectable_content:postscript": _postscript,
    "detectable_format:number_bullet_lists": _number_bullet_lists,
    "detectable_format:constrained_response": _constrained_response,
    "detectable_format:number_highlighted_sections": _number_highlighted_sections,
    "detectable_format:multiple_sections": _multiple_sections,
    "detectable_format:json_format": _json_format,
    "detectable_format:title": _title,
    "combination:two_responses": _two_responses,
    "combination:repeat_prompt": None,  # built from the finished prompt, see _render
    "startend:end_checker": _end_checker,
    "change_case:capital_word_frequency": _capital_word_frequency,
    "change_case:english_capital": _english_capital,
    "change_case:english_lowercase": _english_lowercase,
    "punctuation:no_comma": _no_comma,
    "startend:quotation": _quotation,
}

# Instructions that cannot be met together share a group.
_GROUPS = (
    # what case or language the whole text is in
    {"change_case:english_capital", "change_case:english_lowercase",
     "change_case:capital_word_frequency", "language:response_language",
     "detectable_format:multiple_sections"},
    # how the text is divided (and a sentence count that could not fill the divisions)
    {"length_constraints:number_paragraphs", "length_constraints:nth_paragraph_first_word",
     "detectable_format:multiple_sections", "combination:two_responses",
     "detectable_format:number_bullet_lists", "length_constraints:number_sentences"},
    # how it starts
    {"combination:repeat_prompt", "startend:quotation"},
    # how it ends
    {"startend:end_checker", "detectable_content:postscript", "startend:quotation"},
    # counts that pull against each other
    {"length_constraints:number_sentences", "length_constraints:number_words",
     "keywords:letter_frequency"},
    # Latin letters in a language that may not use them
    {"keywords:letter_frequency", "language:response_language"},
)
# English words a reply in another language should not be asked to contain (or end with).
_NOT_WITH_LANGUAGE = {"keywords:existence", "keywords:frequency", "keywords:forbidden_words",
                      "startend:end_checker"}
# Instructions that fix the whole shape of the reply combine only with these.
_ONLY_WITH = {
    "detectable_format:json_format": {"keywords:existence", "keywords:frequency",
                                      "keywords:forbidden_words", "keywords:letter_frequency",
                                      "length_constraints:number_words"},
    "detectable_format:constrained_response": {"keywords:forbidden_words",
                                               "punctuation:no_comma"},
    "combination:repeat_prompt": {"length_constraints:number_words",
                                  "detectable_content:number_placeholders",
                                  "detectable_format:number_highlighted_sections",
                                  "detectable_format:number_bullet_lists",
                                  "detectable_content:postscript", "startend:end_checker",
                                  "detectable_format:title"},
}


def compatible(a: str, b: str) -> bool:
    """Whether instructions ``a`` and ``b`` may appear in one prompt."""
    if a == b:
        return False
    for one, other in ((a, b), (b, a)):
        if one in _ONLY_WITH and other not in _ONLY_WITH[one]:
            return False
    if "language:response_language" in (a, b) and {a, b} & _NOT_WITH_LANGUAGE:
        return False
    return not any(a in group and b in group for group in _GROUPS)


def _pick_instructions(rng: random.Random, count: int) -> list[str]:
    chosen: list[str] = []
    for _ in range(count):
        options = [i for i in INSTRUCTION_IDS if all(compatible(i, c) for c in chosen)]
        if not options:
            break
        chosen.append(rng.choice(options))
    return chosen


def _render(rng: random.Random, ids: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """The prompt text and kwargs for a list of instruction ids."""
    yes_no = "detectable_format:constrained_response" in ids
    topic = rng.choice(YES_NO_QUESTIONS if yes_no else TOPICS)
    sentences, kwargs = [topic], []
    for iid in ids:
        if iid == "combination:repeat_prompt":
            kwargs.append(None)
            continue
        text, args = TEMPLATES[iid](rng)
        sentences.append(text)
        kwargs.append(args)
    request = " ".join(sentences)
    if "combination:repeat_prompt" in ids:
        kwargs[ids.index("combination:repeat_prompt")] = {"prompt_to_repeat": request}
        return f"{request} {REPEAT_SENTENCE}", kwargs
    return request, kwargs


def generate_instruction_prompts(n: int, seed: int = 0, max_instructions: int = 3
                                 ) -> list[dict[str, Any]]:
    """``n`` distinct prompts ``{prompt, instruction_id_list, kwargs}``, a function of the seed.

    Each has 1 to ``max_instructions`` mutually compatible instructions; no prompt repeats
    within a call, and none equals an IFEval prompt.
    """
    from tir_envs.data.ifeval import ifeval_prompts

    if n < 0 or max_instructions < 1:
        raise ValueError(f"need n >= 0 and max_instructions >= 1, got n={n}, "
                         f"max_instructions={max_instructions}")
    rng = random.Random(seed)
    held_out = {" ".join(p.split()).lower() for p in ifeval_prompts()}
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 100:
            raise ValueError(f"could not make {n} distinct prompts (got {len(out)}); ask for fewer")
        ids = _pick_instructions(rng, rng.randint(1, max_instructions))
        prompt, kwargs = _render(rng, ids)
        key = " ".join(prompt.split()).lower()
        if key in seen or key in held_out:
            continue
        seen.add(key)
        kwargs = [validate_kwargs(iid, kw) for iid, kw in zip(ids, kwargs)]
        out.append({"prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs})
    return out


def generate_instruction_tasks(n: int, seed: int = 0, max_instructions: int = 3) -> list[Task]:
    """Generated prompts as tasks for ``IFEvalReward`` (ids ``ifgen-<seed>-<i>``)."""
    return [Task(id=f"ifgen-{seed}-{i}", question=p["prompt"], answer=None,
                 meta={"dataset": "instructions", "domain": DOMAIN, "tool": None,
                       "instruction_id_list": p["instruction_id_list"], "kwargs": p["kwargs"]})
            for i, p in enumerate(generate_instruction_prompts(n, seed, max_instructions))]
