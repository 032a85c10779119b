"""An IFEval "gold": a response built to follow every instruction of a prompt.

IFEval ships no reference answers, so the benchmark oracle writes its own: a response composed
from the prompt's instructions (sentences, paragraphs, sections, bullets, keywords, letters,
case, language, wrapping), then checked with the project's IFEval checker
(``tir_envs.rewards.ifeval``).  A few variants are tried (filler sentences, order); the first
that follows every instruction is the answer.  A prompt no variant satisfies raises
``NoResponse`` naming the instructions left unfollowed, so a checker or data bug shows up.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any, Iterator, Mapping

from tir_envs.rewards.ifeval import check_instruction, task_instructions, validate_kwargs
from tir_envs.task import Task


class NoResponse(ValueError):
    """No composed response follows every instruction of the prompt."""


#: English filler: no commas, no "I" (an all-capital word), varied letters (some avoid a, e,
#: i, o, t, c, p, w entirely), each a complete sentence.
ENGLISH = [
    "The morning light fell softly across the quiet valley.",
    "Many people enjoy long walks along the river in spring.",
    "This short story follows a young student on her first journey.",
    "Good planning helps every team reach its goals on time.",
    "The old library holds thousands of rare books and maps.",
    "One calm mind can solve hard puzzles with ease.",
    "Fresh bread from the local bakery smells wonderful.",
    "Our small garden grows tomatoes and beans every summer.",
    "Clear writing makes complex ideas easier to understand.",
    "The city market opens early on Saturday mornings.",
    "Music brings people together across many cultures.",
    "Regular exercise supports both health and happiness.",
    "Our big dog sat by a warm fire all night long.",
    "Kids sang and ran around a small park.",
    "Cold wind hit our town on a dark day.",
    "Smart kids study maps of far lands.",
    "Lush hills roll down to a blue bay.",
    "Our dog runs fast on sandy dunes.",
    "Birds sing sweet songs in the morning.",
    "Hungry kids bought fruit and rolls.",
    "Rivers run down from high hills to the sea.",
    "Bold ideas bring surprising results.",
    "Snowy slopes glow under bright moonlight.",
    "Fog rolls slowly over the quiet lake.",
]

#: sentences langdetect still reads as English when written in capitals (most short English
#: sentences in capitals are read as German)
ENGLISH_IN_CAPITALS = [
    "The weather is good today and we will go to the park with our friends.",
    "We think that this is the best way to do it.",
    "There is nothing we would rather do than read.",
    "They were happy with the results of the work.",
    "It was the first time that she had seen the sea.",
    "Clear writing makes complex ideas easier to understand.",
    "The city market opens early on Saturday mornings.",
    "This short story follows a young student on her first journey.",
    "Music brings people together across many cultures.",
    "Rivers run down from high hills to the sea.",
]

#: one or two plain sentences per language IFEval asks for (our own wording)
FOREIGN = {
    "hi": "यह एक छोटा सा उत्तर है। मुझे यह विषय बहुत पसंद है।",
    "kn": "ಇದು ಒಂದು ಚಿಕ್ಕ ಉತ್ತರ. ನನಗೆ ಈ ವಿಷಯ ತುಂಬಾ ಇಷ್ಟ.",
    "mr": "हे एक छोटे उत्तर आहे. मला हा विषय खूप आवडतो आणि मी त्याबद्दल नेहमी वाचतो.",
    "vi": "Đây là một câu trả lời ngắn. Tôi rất thích chủ đề này.",
    "ko": "이것은 짧은 대답입니다. 저는 이 주제를 정말 좋아합니다.",
    "sw": "Hili ni jibu fupi. Ninapenda sana mada hii kwa sababu ni muhimu kwetu.",
    "de": "Das ist eine kurze Antwort. Ich mag dieses Thema sehr.",
    "pa": "ਇਹ ਇੱਕ ਛੋਟਾ ਜਵਾਬ ਹੈ। ਮੈਨੂੰ ਇਹ ਵਿਸ਼ਾ ਬਹੁਤ ਪਸੰਦ ਹੈ।",
    "fa": "این یک پاسخ کوتاه است. من این موضوع را خیلی دوست دارم.",
    "ru": "Это короткий ответ. Мне очень нравится эта тема.",
    "bg": "Това е кратък отговор. Много ми харесва тази тема и често чета за нея.",
    "pt": "Esta é uma resposta curta. Eu gosto muito deste assunto.",
    "gu": "આ એક ટૂંકો જવાબ છે. મને આ વિષય ખૂબ ગમે છે.",
    "te": "ఇది ఒక చిన్న సమాధానం. నాకు ఈ విషయం చాలా ఇష్టం.",
    "it": "Questa è una risposta breve. Mi piace molto questo argomento.",
    "ar": "هذه إجابة قصيرة. أنا أحب هذا الموضوع كثيرا.",
    "ta": "இது ஒரு சிறிய பதில். எனக்கு இந்த தலைப்பு மிகவும் பிடிக்கும்.",
    "fi": "Tämä on lyhyt vastaus. Pidän tästä aiheesta todella paljon.",
    "ur": "یہ ایک مختصر جواب ہے۔ مجھے یہ موضوع بہت پسند ہے۔",
    "th": "นี่คือคำตอบสั้นๆ ฉันชอบหัวข้อนี้มาก",
    "ne": "यो एउटा छोटो उत्तर हो। मलाई यो विषय धेरै मन पर्छ।",
    "bn": "এটি একটি ছোট উত্তর। আমি এই বিষয়টি খুব পছন্দ করি।",
}


def ifeval_response(task: Task, best_effort: bool = False) -> str:
    """A response following every instruction of ``task`` (an IFEval prompt).

    Raises ``NoResponse`` when none is found, saying why (a provable contradiction between the
    prompt's instructions, or the instructions no variant followed); ``best_effort=True``
    returns the variant that follows the most instead.
    """
    ids, kwargs = task_instructions(task)
    spec = _Spec(ids, kwargs)
    best: tuple[int, list[str], str] | None = None
    for text in _variants(spec):
        missed = [i for i, kw in zip(ids, kwargs) if not check_instruction(i, text, kw)]
        if not missed:
            return text
        if best is None or len(missed) < best[0]:
            best = (len(missed), missed, text)
    if best_effort:
        return best[2]
    conflict = contradiction(spec)
    if conflict:
        raise NoResponse(f"task {task.id!r}: its instructions contradict each other: {conflict}")
    raise NoResponse(f"task {task.id!r}: no composed response follows {best[1]}")


def contradicts(task: Task) -> str | None:
    """Why no response can follow every instruction of ``task``, when that is provable."""
    return contradiction(_Spec(*task_instructions(task)))


class _Spec:
    """A prompt's instructions: arguments by id (every instance), and the numeric bounds."""

    def __init__(self, ids, kwargs):
        self.args: dict[str, list[dict[str, Any]]] = {}
        for iid, kw in zip(ids, kwargs):
            self.args.setdefault(iid, []).append(validate_kwargs(iid, kw))

    def has(self, iid: str) -> bool:
        return iid in self.args

    def one(self, iid: str) -> dict[str, Any]:
        return self.args[iid][0]

    def bounds(self, iid: str, field: str, relation: str = "relation",
               where: Mapping[str, Any] | None = None) -> tuple[int, int | None]:
        """``[low, high)`` from every ``at least`` / ``less than`` instance of ``iid``."""
        low, high = 0, None
        for a in self.args.get(iid, []):
            if where and any(a.get(k) != v for k, v in where.items()):
                continue
            if a[relation] == "at least":
                low = max(low, a[field])
            else:
                high = a[field] if high is None else min(high, a[field])
        return low, high


def contradiction(spec: _Spec) -> str | None:
    """Why no response can follow all the instructions, when that is provable (or None).

    IFEval has such prompts: the request to repeat holds a comma, or a word, that another
    instruction of the same prompt forbids.
    """
    if not spec.has("combination:repeat_prompt"):
        return None
    prompt = spec.one("combination:repeat_prompt")["prompt_to_repeat"]
    if spec.has("punctuation:no_comma") and "," in prompt:
        return "the prompt to repeat verbatim contains a comma, and commas are forbidden"
    for args in spec.args.get("keywords:frequency", []):
        hits = len(re.findall(re.escape(args["keyword"].strip()), prompt, flags=re.IGNORECASE))
        if args["relation"] == "less than" and hits >= args["frequency"]:
            return (f"the prompt to repeat verbatim contains {args['keyword']!r} {hits} times, "
                    f"fewer than {args['frequency']} are allowed")
    for args in spec.args.get("keywords:forbidden_words", []):
        hit = [w for w in args["forbidden_words"]
               if re.search(r"\b" + re.escape(w) + r"\b", prompt, flags=re.IGNORECASE)]
        if hit:
            return f"the prompt to repeat verbatim contains the forbidden word(s) {hit}"
    return None


# ------------------------------------------------------------------------------ composing
def _variants(spec: _Spec) -> Iterator[str]:
    """Compositions to try: filler choice and order, then sizes searched against the
    length bounds by measuring the composed text."""
    from tir_envs.rewards.ifeval.text import count_sentences, count_words

    w_low, w_high = spec.bounds("length_constraints:number_words", "num_words")
    s_low, s_high = spec.bounds("length_constraints:number_sentences", "num_sentences")
    for repeat, offset, spread in itertools.product((1, 3, 10), range(0, len(ENGLISH), 4),
                                                    (False, True)):
        def make(n: int, merge: int | None) -> str:
            return _compose(spec, offset, spread, repeat, n, merge)
        base = _base_count(spec)
        n = base
        if w_low or w_high is not None:  # the smallest filler count that reaches w_low
            while count_words(make(n, None)) < w_low and n < 400:
                n += 1
        yield make(n, None)
        if s_high is not None:
            for merge in range(max(1, s_high - 1), 0, -1):
                text = make(n, merge)
                got = count_sentences(text)
                if got < s_high:
                    yield text
                    if got < max(s_low, 1):
                        break


def _base_count(spec: _Spec) -> int:
    s_low, _ = spec.bounds("length_constraints:number_sentences", "num_sentences")
    parts = max([1] + [a.get("num_paragraphs", a.get("num_sections", 1)) for key in (
        "length_constraints:number_paragraphs", "length_constraints:nth_paragraph_first_word",
        "detectable_format:multiple_sections") for a in spec.args.get(key, [])])
    return max(2, s_low + 1, parts)


def _filler(spec: _Spec, offset: int, repeat: int) -> list[str]:
    """Sentences allowed by the letter, keyword and forbidden-word limits, from ``offset``."""
    if spec.has("language:response_language"):
        language = spec.one("language:response_language")["language"]
        if language != "en":
            return [FOREIGN[language]] * repeat
    banned_letters = [a["letter"].lower() for a in spec.args.get("keywords:letter_frequency", [])
                      if a["let_relation"] == "less than"]
    banned_words = [w.lower() for a in spec.args.get("keywords:forbidden_words", [])
                    for w in a["forbidden_words"]]
    banned_words += [a["keyword"].lower() for a in spec.args.get("keywords:frequency", [])]
    source = ENGLISH_IN_CAPITALS if spec.has("change_case:english_capital") else ENGLISH
    offset %= len(source)
    pool = source[offset:] + source[:offset]
    ok = [s for s in pool if not any(c in s.lower() for c in banned_letters)
          and not any(w in s.lower() for w in banned_words)]
    return ok or pool


def _cycle(sentences: list[str], n: int) -> list[str]:
    return [sentences[i % len(sentences)] for i in range(n)]


def _inserts(spec: _Spec) -> list[str]:
    """Sentences that carry required words, letters, placeholders and highlights."""
    out = []
    for a in spec.args.get("keywords:existence", []):
        out.append("Key words here: " + " and ".join(a["keywords"]) + ".")
    for keyword in {a["keyword"] for a in spec.args.get("keywords:frequency", [])}:
        low, _ = spec.bounds("keywords:frequency", "frequency", where={"keyword": keyword})
        if low:
            out.append(" and ".join([f"the {keyword} matters"] * low).capitalize() + ".")
    for a in spec.args.get("keywords:letter_frequency", []):
        if a["let_relation"] == "at least":
            out.append(a["letter"] * a["let_frequency"] + ".")
    low, _ = spec.bounds("change_case:capital_word_frequency", "capital_frequency",
                         "capital_relation")
    if low:
        out.append("Note " + " ".join(["NOTE"] * low) + ".")
    if spec.has("detectable_content:number_placeholders"):
        n = spec.one("detectable_content:number_placeholders")["num_placeholders"]
        out.append("Fill in " + " ".join(f"[item{i + 1}]" for i in range(n)) + ".")
    if spec.has("detectable_format:number_highlighted_sections"):
        n = spec.one("detectable_format:number_highlighted_sections")["num_highlights"]
        out.append("See " + " ".join(f"*part {i + 1}*" for i in range(n)) + ".")
    if spec.has("detectable_format:constrained_response"):
        out.append("My answer is yes.")
    return out


def _merge(sentences: list[str], n: int) -> list[str]:
    """``sentences`` joined into ``n`` sentences with "and" (no comma, no new full stop)."""
    if n <= 0 or len(sentences) <= n:
        return sentences
    groups = _split(sentences, n)
    return [" and ".join(s.rstrip(".。।۔") for s in g) + "." for g in groups if g]


def _split(items: list[str], parts: int) -> list[list[str]]:
    size, extra = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (i < extra)
        out.append(items[start:end])
        start = end
    return out


def _body(spec: _Spec, offset: int, spread: bool, repeat: int, n: int,
          merge: int | None) -> list[str]:
    """The sentences of the response: inserts and ``n`` filler sentences (``repeat`` times
    more text when no bound limits it), merged into ``merge`` sentences if given."""
    filler = _filler(spec, offset, repeat)
    _, w_high = spec.bounds("length_constraints:number_words", "num_words")
    _, s_high = spec.bounds("length_constraints:number_sentences", "num_sentences")
    if w_high is not None:
        filler = sorted(filler, key=lambda x: len(x.split()))
    elif s_high is None:
        n *= repeat
    body = _cycle(filler, n)
    sentences = _inserts(spec) + body
    if spread:
        sentences = body[:1] + _inserts(spec) + body[1:]
    return sentences if merge is None else _merge(sentences, merge)


def _compose(spec: _Spec, offset: int, spread: bool, repeat: int, n: int,
             merge: int | None) -> str:
    sentences = _body(spec, offset, spread, repeat, n, merge)
    lead, tail = [], []
    if spec.has("combination:repeat_prompt"):
        lead.append(spec.one("combination:repeat_prompt")["prompt_to_repeat"].strip())
    if spec.has("detectable_format:title"):
        lead.append("<<Short title>>")
    if spec.has("detectable_format:number_bullet_lists"):
        n = spec.one("detectable_format:number_bullet_lists")["num_bullets"]
        tail.append("\n".join(f"* {b}" for b in _cycle(_filler(spec, offset, 1), n)))
    closing = []
    if spec.has("detectable_content:postscript"):
        closing.append(spec.one("detectable_content:postscript")["postscript_marker"].strip()
                       + " One more note.")
    if spec.has("startend:end_checker"):
        closing.append(spec.one("startend:end_checker")["end_phrase"].strip())
    if closing:
        tail.append(" ".join(closing))
    paragraphs = _paragraphs(spec, sentences)
    if spec.has("length_constraints:nth_paragraph_first_word"):
        # blank lines separate paragraphs: lead and tail join the first and last with "\n"
        paragraphs[0] = "\n".join(lead + [paragraphs[0]])
        paragraphs[-1] = "\n".join([paragraphs[-1]] + tail)
        text = "\n\n".join(paragraphs)
    else:
        text = "\n\n".join(lead + paragraphs + tail)
    if spec.has("combination:two_responses"):
        text = text + "\n******\n" + _case(spec, "Another short view.") \
            if spec.has("length_constraints:number_words") else \
            text + "\n******\n" + text + " Another view."
    return _wrap(spec, _case(spec, text))


def _paragraphs(spec: _Spec, sentences: list[str]) -> list[str]:
    if spec.has("detectable_format:multiple_sections"):
        sec = spec.one("detectable_format:multiple_sections")
        groups = _split(sentences, sec["num_sections"])
        return ["\n\n".join(f"{sec['section_spliter'].strip()} {i + 1}\n" + " ".join(g)
                             for i, g in enumerate(groups))]
    if spec.has("length_constraints:number_paragraphs"):
        n = spec.one("length_constraints:number_paragraphs")["num_paragraphs"]
        return ["\n***\n".join(" ".join(g) for g in _split(sentences, n))]
    if spec.has("length_constraints:nth_paragraph_first_word"):
        a = spec.one("length_constraints:nth_paragraph_first_word")
        groups = [" ".join(g) for g in _split(sentences, a["num_paragraphs"])]
        nth = a["nth_paragraph"] - 1
        groups[nth] = a["first_word"].capitalize() + " " + groups[nth]
        return groups
    return [" ".join(sentences)]


def _case(spec: _Spec, text: str) -> str:
    if spec.has("change_case:english_capital"):
        return text.upper()
    if spec.has("change_case:english_lowercase"):
        return text.lower()
    return text


def _wrap(spec: _Spec, text: str) -> str:
    if spec.has("punctuation:no_comma"):
        text = text.replace(",", "")
    if spec.has("detectable_format:json_format"):
        text = json.dumps({"response": text}, ensure_ascii=False)
    if spec.has("startend:quotation"):
        text = f'"{text}"'
    return text
