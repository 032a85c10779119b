"""SQL env costs on the shipped Spider dev data, per engine, as JSON.

For each engine (``sqlite``: the default for Spider's SQLite files; ``duckdb``: the explicit
choice, over converted copies), on the gold queries that engine runs:

* ``bare_query_ms``: the prediction executed on a warm connection through the driver alone
  (``con.execute(sql).fetchall()``): the least any execution-match reward must pay;
* ``executor_ms``: the same through the tool's guarded executor (``run_query``: statement
  checks, time limit, caps; up to the tool's 1000 rows), what every ``<sql>`` call pays;
* ``reward_ms``: a whole ``SQLReward`` call on the gold as the solution (solution extraction,
  database lookup, the executor, normalisation, comparison), gold result cached as in
  training, where a task is scored many times; ``reward_cold_ms``: the first call per task
  (the gold runs too, and its tie structure for ordered golds);
* ``reward_over_bare`` and ``reward_over_executor``: median over the queries of the per-query
  ratio.  Each query's three measures are taken after one untimed run of each (statement
  prepared, pages cached for all), then ``--rounds`` times interleaved (bare, executor,
  reward, bare, …), keeping the fastest of each: on a loaded machine the fastest run is the
  one least disturbed by other processes.  ``total_reward_over_total_*``: the same over the
  summed times of all queries;
* ``session_open_ms``: opening an episode's connection.

Also ``conversion_all_19_s`` (SQLite → DuckDB copies, needed for ``engine="duckdb"`` only).
Run: ``python benchmarks/perf/sql.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

from tir_envs.data.spider import load_spider, spider_databases  # noqa: E402
from tir_envs.protocols.skyrl_sql import SkyRLSQLProtocol  # noqa: E402
from tir_envs.rewards import sql as sql_reward  # noqa: E402
from tir_envs.tools.sql.convert import duckdb_copy  # noqa: E402
from tir_envs.tools.sql.database import close_databases, open_database  # noqa: E402
from tir_envs.tools.sql.dialect import adapt  # noqa: E402
from tir_envs.tools.sql.executor import run_query  # noqa: E402
from tir_envs.trajectory import Trajectory  # noqa: E402


#: rows the ``<sql>`` tool fetches per query (``ResultLimits().count_rows``)
TOOL_ROWS = 1000


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _runnable(tasks, engine: str, cache: Path) -> list:
    """The tasks whose gold runs on ``engine`` (all 972 on SQLite)."""
    out = []
    for t in tasks:
        db = open_database(t.meta["db_path"], cache_dir=cache, engine=engine)
        try:
            sql_reward.gold_result(t.answer, db)
            out.append(t)
        except sql_reward.GoldQueryError:
            pass
    return out


def engine_costs(tasks, engine: str, cache: Path, rounds: int) -> dict:
    runnable = _runnable(tasks, engine, cache)
    reward = sql_reward.SQLReward(engine=engine, cache_dir=cache)
    # the protocol reads the solution, as the env does (offline grading goes through it)
    protocol = SkyRLSQLProtocol(lambda task: ("sqlite", ""))
    dbs = {t.meta["db_id"]: open_database(t.meta["db_path"], cache_dir=cache, engine=engine)
           for t in runnable}
    cons = {k: db.connect() for k, db in dbs.items()}
    # the driver's own text: DuckDB needs the executor's dialect adaptation to run Spider SQL
    text = {t.id: adapt(t.answer) if engine == "duckdb" else t.answer for t in runnable}
    actions = {t.id: [f"<solution>{t.answer}</solution>"] for t in runnable}

    sql_reward._gold_cached.cache_clear()
    cold = [_timed(lambda: protocol.grade(reward, t, actions[t.id], Trajectory())) for t in runnable]
    bare, executor, warm = [], [], []
    for t in runnable:
        con, trajectory = cons[t.meta["db_id"]], Trajectory()
        steps = (lambda: con.execute(text[t.id]).fetchall(),
                 lambda: run_query(con, t.answer, timeout_s=30, max_rows=TOOL_ROWS),
                 lambda: protocol.grade(reward, t, actions[t.id], trajectory))
        for step in steps:  # same state for all three: statement prepared, pages cached
            step()
        best = [math.inf] * 3
        for _ in range(rounds):  # interleaved; the fastest of the rounds is the least disturbed
            for i, step in enumerate(steps):
                best[i] = min(best[i], _timed(step))
        bare.append(best[0])
        executor.append(best[1])
        warm.append(best[2])
    ratio_bare = [r / b for r, b in zip(warm, bare)]
    ratio_exec = [r / e for r, e in zip(warm, executor)]
    db = dbs["world_1"]
    session = _timed(lambda: [db.connect().close() for _ in range(200)]) / 200
    for con in cons.values():
        con.close()

    def ms(xs):
        return round(1000 * statistics.median(xs), 4)

    return {"engine": dbs["world_1"].engine_name, "gold_queries": len(runnable),
            "rounds": rounds, "bare_query_ms": ms(bare), "executor_ms": ms(executor),
            "reward_ms": ms(warm), "reward_cold_ms": ms(cold),
            "reward_over_bare": round(statistics.median(ratio_bare), 2),
            "reward_over_executor": round(statistics.median(ratio_exec), 2),
            "total_reward_over_total_bare": round(sum(warm) / sum(bare), 2),
            "total_reward_over_total_executor": round(sum(warm) / sum(executor), 2),
            "session_open_ms": round(1000 * session, 4)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=pick(5, 1),
                        help="timed runs per query and measure (the fastest is kept)")
    args = parser.parse_args(argv)
    tasks = load_spider()
    if QUICK:  # ten queries of the database the session figure uses
        tasks = [t for t in tasks if t.meta["db_id"] == "world_1"][:10]
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        result = {"conversion_all_19_s": round(_timed(
            lambda: [duckdb_copy(p, cache) for p in spider_databases().values()]), 3)}
        for engine in ("sqlite", "duckdb"):
            result[engine] = engine_costs(tasks, engine, cache, args.rounds)
        close_databases()
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
