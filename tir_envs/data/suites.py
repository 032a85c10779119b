"""The benchmark suite catalogue: an env, its protocol settings, a pinned task set and how it is
scored, each suite one record in ``SUITES``.

It sits with the data it pins (not in ``benchmarks``) so that every floor above can read it:
the benchmark harness runs the suites, and the trainers refuse or warn about training on their
questions (``tir_envs.trainers.common.eval_guard``).  Custom suites over one's own task file, and the
lookup by name that knows them, are the harness's (``tir_envs.bench.suites``).

A suite is made of one or more *parts*.  A part is one shipped data file, pinned by its item
count and the sha256 of the file's bytes: loading a part whose file changed fails with an error
naming the file, both hashes and what to do, so a number in a report always means the same items.
Items run in file order; a suite's items are its parts' items, part after part.

Each suite names its env id, the env arguments that fix the protocol (``protocol=`` for
``tir/MathCode-v0``), and a ``scoring`` kind that says how answers are compared for maj@k and
which extra metrics apply:

* ``math``: answers grouped by the math grader's equivalence;
* ``qa``: EM and F1; answers grouped by SQuAD-normalised text;
* ``sql``: execution match; answers grouped by the result set they return;
* ``choice``: option letters; ``ifeval``: IFEval's four accuracies (no maj@k: no single answer).

``use_tools=False`` (the "w/o tools" column) is passed to the env, whose protocol then uses its
standalone prompt and executes no tool.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tir_envs.task import Task

SCORING = ("math", "qa", "sql", "choice", "ifeval")


class SuiteDataError(RuntimeError):
    """A shipped data file does not hold the items a suite was pinned to."""


@dataclass(frozen=True)
class Part:
    """One pinned data file of a suite.

    ``file``: the path inside the ``tir_envs`` package; ``load``: returns its tasks in file
    order; ``count`` and ``sha256``: what the file must hold.  ``scoring`` and ``meta`` (the
    AutoTIR ``domain``/``tool`` a task carries when the env does not set them) describe it;
    ``breakdowns``: task fields the report breaks its accuracy down by (MATH-500's level and
    subject).  ``license``: the data's license (``SOURCES.md`` beside the file), shown by
    ``tir-envs bench list``.
    """

    name: str
    file: str
    count: int
    sha256: str
    load: Callable[[], Sequence[Task]]
    scoring: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    breakdowns: tuple[str, ...] = ()  # task fields the report always breaks results down by
    license: str = ""

    def path(self) -> Path:
        """The file: inside the package, or an absolute path (a custom suite's)."""
        if Path(self.file).is_absolute():
            return Path(self.file)
        from importlib import resources  # here: `bench list` runs without it

        return Path(str(resources.files("tir_envs").joinpath(self.file)))

    def tasks(self) -> list[Task]:
        """The part's tasks, after checking the file's hash and the item count."""
        path = self.path()
        if not path.is_file():
            raise SuiteDataError(f"part {self.name!r}: {self.file} is missing from the installed "
                                 f"tir_envs package ({path}); reinstall the package")
        digest = file_sha256(path)
        if digest != self.sha256:
            raise SuiteDataError(
                f"part {self.name!r}: {path} changed: its sha256 is {digest}, the suite is "
                f"pinned to {self.sha256}. Results would not be comparable with earlier runs; "
                "if the change is intended, update the pin in tir_envs/data/suites.py (and say so "
                "in docs/benchmarks.md)")
        tasks = list(self.load())
        if len(tasks) != self.count:
            raise SuiteDataError(f"part {self.name!r}: {self.file} gave {len(tasks)} items, the "
                                 f"suite is pinned to {self.count}")
        return [_with_meta(t, self.meta) for t in tasks] if self.meta else tasks


@dataclass(frozen=True)
class Suite:
    """An env id, the env arguments that pin its protocol, and its parts (module docstring).

    ``options`` names the run options this suite accepts (``protocol`` for math suites).
    """

    name: str
    env_id: str
    parts: tuple[Part, ...]
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    options: tuple[str, ...] = ()
    description: str = ""
    #: the rubric an LLM judge grades this suite's answers by (``tir_envs.bench.judging``)
    judge: str | None = None

    @property
    def count(self) -> int:
        return sum(p.count for p in self.parts)

    def items(self, limit: int | None = None) -> list[tuple[Part, Task]]:
        """``(part, task)`` for every item, in order; ``limit``: the first N of each part."""
        out = []
        for part in self.parts:
            out.extend((part, t) for t in part.tasks()[:limit])
        return out

    def make_kwargs(self, use_tools: bool = True, protocol: str | None = None,
                    extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Env keyword arguments for a run of this suite."""
        kwargs = dict(self.env_kwargs)
        if protocol is not None:
            if "protocol" not in self.options:
                raise ValueError(f"suite {self.name!r} has a fixed protocol; protocol= applies "
                                 f"only to the math suites ({', '.join(MATH_SUITES)})")
            kwargs["protocol"] = protocol
        if not use_tools:
            kwargs["use_tools"] = False
        kwargs.update(extra or {})
        return kwargs


def _with_meta(task: Task, meta: Mapping[str, Any]) -> Task:
    missing = {k: v for k, v in meta.items() if k not in task.meta}
    if not missing:
        return task
    return Task(task.id, task.question, task.answer, {**task.meta, **missing})


@functools.lru_cache(maxsize=64)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes (remembered per path, size and modification time)."""
    st = path.stat()
    return _sha256_cached(str(path), st.st_size, st.st_mtime_ns)


# ------------------------------------------------------------------------------ parts
def _math(name: str, dataset: str, file: str, count: int, sha: str) -> Part:
    from tir_envs.data.math import MATH_DATASETS

    def load() -> list[Task]:
        from tir_envs.data.math import load_math_tasks
        return load_math_tasks(dataset)
    return Part(name, f"data/math/{file}", count, sha, load, "math",
                {"domain": "math", "tool": "python"},
                ("level", "subject") if dataset == "math500" else (),
                MATH_DATASETS[dataset].license)


_QA_LICENSES = {"hotpotqa": "CC BY-SA 4.0 (HotpotQA); BSD-3-Clause (RPT)",
                "2wiki": "Apache-2.0 (2WikiMultihopQA); MIT (R1-Searcher)",
                "musique": "CC BY 4.0 (MuSiQue); MIT (R1-Searcher)",
                "bamboogle": "as published with self-ask (Press et al.); MIT (R1-Searcher)",
                "nq": "CC BY-SA 3.0 (Natural Questions)"}


def _qa(name: str, dataset: str, file: str, count: int, sha: str) -> Part:
    def load() -> list[Task]:
        from tir_envs.data.qa import load_qa
        return load_qa(dataset)
    return Part(name, f"data/qa/{file}", count, sha, load, "qa",
                {"domain": "knowledge", "tool": "search"}, license=_QA_LICENSES[name])


def _spider() -> list[Task]:
    from tir_envs.data.spider import load_spider
    return load_spider()


PARTS: dict[str, Part] = {p.name: p for p in [
    _math("aime24", "aime2024", "aime2024.jsonl", 30,
          "af2b8bd2aa911b6333ad0df32f3ca05c7ae8ed10f1731f4372c8ae26990bf7ac"),
    _math("aime25", "aime2025", "aime2025.jsonl", 30,
          "c48ca244abea39e9875ad4b755f714b215a0c837114bc898220d6abcd33001aa"),
    _math("math500", "math500", "math500.jsonl", 500,
          "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132"),
    _math("gsm8k", "gsm8k", "gsm8k.jsonl", 1319,
          "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"),
    # the seed papers' other math benchmarks (issue 33); theoremqa: its 747 text-only questions
    _math("amc23", "amc23", "amc23.jsonl", 40,
          "43707e1ca784602d8479de24ee8ce36609dbebc46dd152b0b12a46611aa898a4"),
    _math("minerva_math", "minerva_math", "minerva_math.jsonl", 272,
          "8474d9ce5d72710e06d11188a26572217ded2e493b48b835598a459c5b7fa84c"),
    _math("olympiadbench", "olympiadbench", "olympiadbench.jsonl", 675,
          "0d2a15e1f081bb42cd163f1510600bbaaa4fe6580a01c63527311cf2d336faf9"),
    _math("hmmt_feb2025", "hmmt_feb2025", "hmmt_feb2025.jsonl", 30,
          "86825dc3a44cf9fd5fd62c5d6a4ab4afeb8feba1ae47ded20eea5663ec733524"),
    _math("theoremqa", "theoremqa", "theoremqa.jsonl", 747,
          "0c4f5d11e72bfbfc7f6649cabbbde66e04e82c88fd7fce4cd09bba68aec6b2f8"),
    # HotpotQA: the dev-distractor subset whose paragraphs make the shipped retrieval index,
    # so every gold supporting paragraph can be found.
    _qa("hotpotqa", "hotpotqa_distractor", "hotpotqa_dev_distractor_1100.jsonl.gz", 1100,
        "6340e6c7c90649cb0e9f48f1ebfd2266982cf6e381463d9ca336272149e27631"),
    _qa("2wiki", "2wiki", "2wikimultihopqa_dev_500.jsonl.gz", 500,
        "3ac75bf7f137f8455bcdbde51988d80f5574204354bc435f7a521aa7f8eb1792"),
    _qa("musique", "musique", "musique_dev_500.jsonl.gz", 500,
        "1e4583fc43c8fe8c8ef3d99ac1b6e9697c12de37b1ec60fc04b77cc742cca456"),
    _qa("bamboogle", "bamboogle", "bamboogle_test_125.jsonl.gz", 125,
        "d7bec336717d096002d0fb1d700d906aa2414c4c851a2b94a3f50fd8551b177e"),
    _qa("nq", "nq", "nq_open_test_3610.jsonl.gz", 3610,
        "70d8a86519bb3dcebc5b5574a96d2daaf3099c5e760cfbca39f5bc3b2e7b0c24"),
    Part("spider", "data/spider/questions.jsonl", 972,
         "f8f1ba1cf48add827d53b24e524c20ef3295e17bb992d953d22932ab86d397ab", _spider, "sql",
         license="CC BY-SA 4.0 (Spider)"),
]}

MATH_SUITES = ("aime24", "aime25", "math500", "gsm8k", "amc23", "minerva_math", "olympiadbench",
               "hmmt_feb2025", "theoremqa")
QA_SUITES = ("hotpotqa", "2wiki", "musique", "bamboogle", "nq")


def _suite(name: str, env_id: str, parts: Sequence[str], description: str,
           env_kwargs: Mapping[str, Any] | None = None, options: tuple[str, ...] = ()) -> Suite:
    return Suite(name, env_id, tuple(PARTS[p] for p in parts), dict(env_kwargs or {}), options,
                 description)


SUITES: dict[str, Suite] = {}
for _name in MATH_SUITES:
    # evaluation reads an unboxed final answer too ("The final answer is $9$"); RL keeps boxes
    SUITES[_name] = _suite(_name, "tir/MathCode-v0", [_name], f"{_name}: math with Python",
                           {"protocol": "torl", "extraction": "fallback"}, ("protocol",))
for _name in QA_SUITES:
    SUITES[_name] = _suite(_name, "tir/Search-v0", [_name],
                           f"{_name}: Search-R1 QA on the shipped BM25 index")
SUITES["spider"] = _suite("spider", "tir/SQL-v0", ["spider"],
                          "Spider dev: SkyRL-SQL text-to-SQL, execution match")


# ------------------------------------------------------------------------------ AutoTIR
def _autotir(name: str, file: str, count: int, sha: str, scoring: str,
             license: str = "") -> Part:
    """An evaluation set of ``tir/AutoTIR-v0``, loaded with its domain and ground-truth tool."""
    def load() -> list[Task]:
        from tir_envs.data.autotir import load_autotir_tasks
        return load_autotir_tasks(name)
    return Part(name, file, count, sha, load, scoring,
                breakdowns=("level", "subject") if name == "math500" else (),
                license=license or (PARTS[name].license if name in PARTS else ""))


#: AutoTIR's ten-benchmark table (the R1-Searcher QA samples the paper evaluates on)
AUTOTIR_PARTS: dict[str, Part] = {p.name: p for p in [
    _autotir("hotpotqa", "data/qa/hotpotqa_dev_500.jsonl.gz", 500,
             "f3749d9fe252fd738ffe9564c5032a421d49ce073b7fe4d607d1e9e66759f99d", "qa",
             "CC BY-SA 4.0 (HotpotQA); MIT (R1-Searcher)"),
    _autotir("2wiki", PARTS["2wiki"].file, 500, PARTS["2wiki"].sha256, "qa"),
    _autotir("musique", PARTS["musique"].file, 500, PARTS["musique"].sha256, "qa"),
    _autotir("bamboogle", PARTS["bamboogle"].file, 125, PARTS["bamboogle"].sha256, "qa"),
    _autotir("aime24", PARTS["aime24"].file, 30, PARTS["aime24"].sha256, "math"),
    _autotir("aime25", PARTS["aime25"].file, 30, PARTS["aime25"].sha256, "math"),
    _autotir("math500", PARTS["math500"].file, 500, PARTS["math500"].sha256, "math"),
    _autotir("gsm8k", PARTS["gsm8k"].file, 1319, PARTS["gsm8k"].sha256, "math"),
    _autotir("logiqa", "data/logiqa/logiqa_en_test.txt", 651,
             "359acb78c37802208f7fde9e2f6574b8526527c63d6a336f90a53f1932cb4701", "choice",
             "none stated (LogiQA, Liu et al. 2020); shipped for evaluation only"),
    _autotir("ifeval", "data/ifeval/ifeval_input_data.jsonl", 541,
             "67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49", "ifeval",
             "Apache-2.0 (IFEval)"),
]}

SUITES["ifeval"] = Suite("ifeval", "tir/AutoTIR-v0", (AUTOTIR_PARTS["ifeval"],), {}, (),
                         "IFEval: 541 prompts, strict/loose, prompt/instruction level")
SUITES["logiqa"] = Suite("logiqa", "tir/AutoTIR-v0", (AUTOTIR_PARTS["logiqa"],), {}, (),
                         "LogiQA English test: 651 four-option questions")
#: other names of a suite: the env datasets' own (``tir/MathCode-v0``'s ``aime2024``), so one
#: name works on both sides (``tir-envs rollout --tasks aime24`` and ``bench --suite aime2024``)
SUITE_ALIASES = {"aime2024": "aime24", "aime2025": "aime25", "aime_2024": "aime24",
                 "aime_2025": "aime25", "math-500": "math500", "math_500": "math500",
                 "gsm8k_test": "gsm8k", "2wiki_500": "2wiki", "musique_500": "musique",
                 "nq_open": "nq", "hotpotqa_distractor": "hotpotqa"}


def suite_name(name: str) -> str:
    """The suite's one name (an alias such as ``aime2024`` gives ``aime24``)."""
    return SUITE_ALIASES.get(name, SUITE_ALIASES.get(name.lower(), name))


SUITES["autotir"] = Suite("autotir", "tir/AutoTIR-v0", tuple(AUTOTIR_PARTS.values()), {}, (),
                          "AutoTIR's ten-benchmark table through tir/AutoTIR-v0")

# judged variants (``tir_envs.bench.judging``): an LLM judge (--judge) grades answer equivalence
SUITES["hotpotqa-judged"] = Suite(
    "hotpotqa-judged", "tir/Search-v0", (PARTS["hotpotqa"],), {}, (),
    "hotpotqa graded by an LLM judge: answer equivalence with the gold aliases",
    judge="equivalence")
SUITES["autotir-judged"] = Suite(
    "autotir-judged", "tir/AutoTIR-v0",
    tuple(AUTOTIR_PARTS[n] for n in ("hotpotqa", "2wiki", "musique", "bamboogle")), {}, (),
    "AutoTIR's open-ended (free-form QA) items graded by an LLM judge: answer equivalence",
    judge="equivalence")
