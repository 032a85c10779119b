"""``JudgeReward``: an LLM judge with a rubric, as an env's reward part.

Pointwise (``mode="pointwise"``): ``score(task, trajectory, answer)`` judges the protocol's
one answer, alone, like any reward part (``TIREnv(reward=JudgeReward(...))``, the gateway's
host-side reward, a user's env).

Grouped (``mode="scores"`` or ``"ranking"``): the answers of a GRPO group are judged together
in one call, shown in a shuffled order that is recorded, the setting where relative judges
track hand-written rewards.  In an env the reward then only reads the answer (value 0,
``metadata["judge"]["pending"]``), and ``judge_groups`` (the GRPO trainer calls it on each
step's groups) makes the call and credits each trajectory at its last policy token.

Either way the value is ``verdict / scale`` times the length factor (``length``).  A failed
verdict (out of format) or a judge that errored pays 0 and marks nothing: the episode is
never masked (the policy cannot choose its own mask by derailing the judge).  The raw
exchange (prompt, output, reason) is in ``trajectory.metadata["judge"]``.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from typing import TYPE_CHECKING, Any, Sequence

from tir_envs.rewards.base import Reward, RewardResult
from tir_envs.judge.client import JudgeClient, Judgement
from tir_envs.judge.length import LengthNorm
from tir_envs.judge.rubric import Rubric, reference_text
from tir_envs.judge.verdict import MODES

if TYPE_CHECKING:
    from tir_envs.task import Task
    from tir_envs.trajectory import Trajectory


class JudgeReward(Reward):
    """A judge's verdict as the reward (see the module docstring).

    ``client``: the judge (``JudgeClient``).  ``rubric``: default ``Rubric.equivalence()``
    (answer equivalence with the task's gold).  ``seed``: the grouped shuffle's seed;
    ``permutations``: grouped judging shows each group in this many shuffled orders (calls
    made together) and averages each answer's scores, against position bias.
    """

    #: the reward reads the answer with a judge: ``tir-envs audit`` runs its judge probes
    judged = True

    def __init__(self, client: JudgeClient, rubric: Rubric | None = None,
                 mode: str = "pointwise", length: LengthNorm | None = None, seed: int = 0,
                 permutations: int = 1):
        if not isinstance(client, JudgeClient):
            raise TypeError(f"client must be a JudgeClient, got {type(client).__name__}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not isinstance(permutations, int) or permutations < 1:
            raise ValueError(f"permutations must be an integer >= 1, got {permutations!r}")
        self.client, self.mode, self.seed, self.permutations = client, mode, seed, permutations
        self.rubric = rubric or Rubric.equivalence()
        self.length = length or LengthNorm()

    @property
    def grouped(self) -> bool:
        return self.mode != "pointwise"

    def reference(self, task: "Task") -> str | None:
        if not self.rubric.use_reference:
            return None
        ref = reference_text(task.answer)
        if ref is None:
            raise ValueError(f"task {task.id!r} has no gold answer, and the rubric "
                             f"{self.rubric.name!r} compares with a reference: give tasks an "
                             "'answer' or use Rubric(criteria, use_reference=False)")
        return ref

    # ------------------------------------------------------------------ pointwise
    def score(self, task: "Task", trajectory: "Trajectory | None", answer: Any) -> RewardResult:
        """The verdict from sync code (an env thread): the call runs on the client's loop."""
        early, args = self._prepare(task, answer)
        if early is not None:
            return early
        return self._pointwise(args, self.client.judge(*args[:-1], "pointwise"))

    async def ascore(self, task: "Task", trajectory: "Trajectory | None",
                     answer: Any) -> RewardResult:
        """The verdict awaited, with no thread held while the judge works (an env that awaits
        its reward's ``ascore`` keeps thousands of judged episodes in flight)."""
        early, args = self._prepare(task, answer)
        if early is not None:
            return early
        return self._pointwise(args, await self.client.ajudge(*args[:-1], "pointwise"))

    def _prepare(self, task: "Task", answer: Any) -> tuple[RewardResult | None, tuple]:
        """A result that needs no judge call (grouped: pending; no answer; over length), or
        the call's arguments (rubric, question, reference, [answer]) and the length factor."""
        reference = self.reference(task)
        text = None if answer is None else str(answer)
        if self.grouped:
            return _pending(text, task, reference, self.mode), ()
        factor = 0.0 if not text or not text.strip() else self.length.factor(text, reference)
        if factor == 0.0:
            return _unjudged(text, "no answer" if not text or not text.strip() else
                             "over the length budget: not sent to the judge"), ()
        return None, (self.rubric, task.question, reference, [text], factor)

    def _pointwise(self, args: tuple, judged: Judgement) -> RewardResult:
        return self._result(args[3][0], judged, 0, args[-1], {"mode": "pointwise"})

    def _result(self, text: str, judged: Judgement, index: int, factor: float,
                extra: dict[str, Any], mean_of: list[tuple[Judgement, int]] | None = None
                ) -> RewardResult:
        """``judged``'s score of the answer at ``index`` (or the mean over ``mean_of``'s
        judgements, a failed one counting 0), times the length factor."""
        both = mean_of or [(judged, index)]
        raw = sum(j.scores[i] if j.scores is not None else 0.0 for j, i in both) / len(both)
        value = raw * factor
        ok = all(j.scores is not None for j, _ in both)
        components = {"judge": raw, "length_factor": factor, "judge_failed": float(not ok),
                      "correct": float(value >= self.rubric.threshold), "has_answer": 1.0}
        meta = {"judge": {**extra, **judged.record(), "rubric": self.rubric.name,
                          "answer": text, "value": value}}
        return RewardResult(value, components, correct=value >= self.rubric.threshold,
                            answered=True, metadata=meta)

    # ------------------------------------------------------------------ grouped
    def judge_groups(self, groups: Sequence[Sequence["Trajectory"]]) -> None:
        """``ajudge_groups`` from sync code (run on the judge client's own loop)."""
        asyncio.run_coroutine_threadsafe(self.ajudge_groups(groups),
                                         self.client.loop()).result()

    async def ajudge_groups(self, groups: Sequence[Sequence["Trajectory"]]) -> None:
        """Judge each group's pending answers in one call per group (all groups at once,
        within the client's concurrency bound) and credit every trajectory."""
        await asyncio.gather(*(self._judge_group(list(g)) for g in groups))

    def score_group(self, task: "Task", answers: Sequence[Any]) -> list[RewardResult]:
        """``ascore_group`` from sync code (run on the judge client's own loop)."""
        return asyncio.run_coroutine_threadsafe(self.ascore_group(task, answers),
                                                self.client.loop()).result()

    async def ascore_group(self, task: "Task", answers: Sequence[Any]) -> list[RewardResult]:
        """One result per answer of ``task`` (``None``: no answer), judged together in one
        call (``mode``: ``scores`` or ``ranking``), e.g. a gateway's group of agent runs."""
        if not self.grouped:
            raise ValueError("ascore_group judges a group: make the JudgeReward with "
                             "mode='scores' or mode='ranking'")
        texts = [None if a is None else str(a) for a in answers]
        return await self._group_results(task.id, task.question, self.reference(task), texts)

    async def _judge_group(self, group: list["Trajectory"]) -> None:
        pending = [t for t in group if t.metadata.get("judge", {}).get("pending")]
        if not pending:
            return
        spec = pending[0].metadata["judge"]
        results = await self._group_results(pending[0].task_id, spec["question"],
                                            spec["reference"],
                                            [t.metadata["judge"]["answer"] for t in pending])
        for t, result in zip(pending, results):
            _credit(t, result)

    async def _group_results(self, key: str, question: str, reference: str | None,
                             answers: list[str | None]) -> list[RewardResult]:
        """Answers over the length budget (or empty) are never shown and score 0; the rest
        are shuffled (seeded by the group), judged in one call, and recorded with the order
        shown (``order``: the answers' indices, in shown order)."""
        results: list[RewardResult | None] = [None] * len(answers)
        shown = []
        for i, text in enumerate(answers):
            factor = 0.0 if not text or not text.strip() else self.length.factor(text, reference)
            if factor > 0:
                shown.append((i, text, factor))
            else:
                results[i] = _unjudged(text, "no answer" if not text or not text.strip() else
                                       "over the length budget: not sent to the judge")
        if shown:
            rng = random.Random(self._shuffle_seed(key, answers))
            orders = [rng.sample(range(len(shown)), len(shown))
                      for _ in range(self.permutations)]
            # a ranking of one answer says nothing (it would be first): judged on its own
            mode = "pointwise" if self.mode == "ranking" and len(shown) == 1 else self.mode
            calls = await asyncio.gather(*(self.client.ajudge(
                self.rubric, question, reference, [shown[j][1] for j in order], mode)
                for order in orders))
            for j, (i, text, factor) in enumerate(shown):
                places = [order.index(j) for order in orders]
                extra = {"mode": mode, "group_size": len(answers), "position": places[0],
                         "label": calls[0].labels[places[0]],
                         "order": [shown[x][0] for x in orders[0]]}
                if self.permutations > 1:  # each order's own score of this answer
                    extra["orders"] = [[shown[x][0] for x in order] for order in orders]
                    extra["permutation_scores"] = [c.scores[p] if c.scores else None
                                                   for c, p in zip(calls, places)]
                results[i] = self._result(text, calls[0], places[0], factor, extra,
                                          mean_of=list(zip(calls, places)))
        return results  # type: ignore[return-value]

    def _shuffle_seed(self, key: str, answers: list[str | None]) -> int:
        text = f"{self.seed}:{key}:{len(answers)}:" + "|".join(str(a) for a in answers)
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _pending(text: str | None, task: "Task", reference: str | None, mode: str) -> RewardResult:
    meta = {"judge": {"pending": True, "mode": mode, "question": task.question,
                      "reference": reference, "answer": text}}
    return RewardResult(0.0, {"judge": 0.0, "has_answer": float(text is not None)},
                        correct=None, answered=text is not None, metadata=meta)


def _unjudged(text: str | None, why: str) -> RewardResult:
    """A verdict given without the judge: 0 (no answer, or over the length budget)."""
    answered = bool(text and text.strip())
    return RewardResult(0.0, {"judge": 0.0, "length_factor": 0.0, "judge_failed": 0.0,
                              "correct": 0.0, "has_answer": float(answered)},
                        correct=False, answered=answered,
                        metadata={"judge": {"skipped": why, "answer": text, "value": 0.0}})


def _credit(traj: "Trajectory", result: RewardResult) -> None:
    """Write a grouped verdict onto a trajectory whose env credited 0 for it (``_pending``)."""
    traj.credit(result.value)
    traj.reward = float(sum(traj.token_rewards)) if traj.num_policy_tokens else \
        traj.reward + result.value
    traj.reward_components = {**traj.reward_components, **result.components}
    traj.correct = result.correct
    traj.metadata["judge"] = result.metadata["judge"]
