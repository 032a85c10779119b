"""SQL env costs on the shipped Spider dev data, as JSON.

* ``gold_qps``: the 972 gold queries per second on the policy's path (DuckDB copy, one warm
  cursor per database, the executor's checks included) and on the reward's reference
  (``sqlite3``); ``gold_errors_duckdb`` counts the ones DuckDB will not run verbatim.
* ``attach_vs_convert``: the choice documented in ``docs/sql.md``.  The same queries through
  DuckDB's SQLite scanner (``ATTACH … (TYPE sqlite)``) side by side with the converted DuckDB
  files: queries per second, the cost of opening a session, and the one-time conversion.
* ``env_session_ms``: opening an episode's session (a cursor on the shared read-only instance).
* ``reward``: ``execution_match`` per call with the gold result cached (the steady state of
  training, where a task is scored many times) and uncached, against a bare DuckDB execution
  of the same prediction as the baseline.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import duckdb  # noqa: E402

from tir_envs.data.spider import load_spider, spider_databases  # noqa: E402
from tir_envs.rewards import sql as sql_reward  # noqa: E402
from tir_envs.tools.sql.convert import duckdb_copy, open_sqlite_readonly  # noqa: E402
from tir_envs.tools.sql.database import close_databases, open_database  # noqa: E402
from tir_envs.tools.sql.dialect import adapt  # noqa: E402
from tir_envs.tools.sql.executor import run_query  # noqa: E402


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def convert_all(cache: Path) -> float:
    return _timed(lambda: [duckdb_copy(p, cache) for p in spider_databases().values()])


def gold_qps(tasks, cache: Path) -> dict:
    cursors = {db_id: open_database(p, cache_dir=cache).connect()
               for db_id, p in spider_databases().items()}
    errors = 0

    def duck():
        nonlocal errors
        for t in tasks:
            r = run_query(cursors[t.meta["db_id"]], t.answer, timeout_s=30, max_rows=100_000)
            errors += not r.ok

    sqlite = {db_id: open_sqlite_readonly(p) for db_id, p in spider_databases().items()}

    def ref():
        for t in tasks:
            sqlite[t.meta["db_id"]].execute(t.answer).fetchall()

    duck_s, ref_s = _timed(duck), _timed(ref)
    return {"duckdb_qps": round(len(tasks) / duck_s, 1), "sqlite_qps": round(len(tasks) / ref_s, 1),
            "gold_errors_duckdb": errors, "queries": len(tasks)}


def _scanner_extension() -> Path | None:
    try:
        import duckdb_extension_sqlite_scanner as pkg
    except ImportError:
        return None
    found = list(Path(pkg.__file__).parent.rglob("sqlite_scanner.duckdb_extension"))
    return found[0] if found else None


def attach_vs_convert(tasks, cache: Path, sessions: int = 40, rounds: int = 2) -> dict:
    ext = _scanner_extension()
    if ext is None:
        return {"scanner": None, "note": "duckdb-extension-sqlite-scanner is not installed"}
    dbs = spider_databases()

    def attach(db_id):
        con = duckdb.connect(config={"threads": 1})
        con.execute(f"LOAD '{ext}'")
        con.execute(f"ATTACH '{dbs[db_id]}' AS db (TYPE sqlite, READ_ONLY)")
        con.execute("USE db")
        return con

    def converted(db_id):
        return duckdb.connect(str(duckdb_copy(dbs[db_id], cache)), read_only=True,
                              config={"threads": 1})

    out: dict = {}
    for name, opener in (("scanner", attach), ("converted", converted)):
        ids = [t.meta["db_id"] for t in tasks[:sessions]]
        open_s = _timed(lambda: [opener(i).close() for i in ids])
        out[name] = {"open_session_ms": round(1000 * open_s / len(ids), 2)}
    # Queries interleaved (scanner, converted, scanner, ...) so both see the same machine load.
    cons = {"scanner": {i: attach(i) for i in dbs}, "converted": {i: converted(i) for i in dbs}}
    spent = {"scanner": 0.0, "converted": 0.0}
    for rnd in range(rounds):
        order = ("scanner", "converted") if rnd % 2 == 0 else ("converted", "scanner")
        for t in tasks:
            sql = adapt(t.answer)
            for name in order:
                spent[name] += _timed(lambda: _try(cons[name][t.meta["db_id"]], sql))
    for name in spent:
        out[name]["qps"] = round(rounds * len(tasks) / spent[name], 1)
        for con in cons[name].values():
            con.close()
    out["query_speedup_converted_over_scanner"] = round(spent["scanner"] / spent["converted"], 2)
    return out


def _try(con, sql: str) -> None:
    try:
        con.execute(sql).fetchall()
    except duckdb.Error:
        pass


def session_cost(cache: Path, n: int = 200) -> float:
    """What the env pays per episode to open its session: a cursor on the shared instance."""
    db = open_database(spider_databases()["world_1"], cache_dir=cache)
    db.connect().close()
    return round(1000 * _timed(lambda: [db.connect().close() for _ in range(n)]) / n, 3)


def reward_cost(tasks, cache: Path, n: int = 300) -> dict:
    sample = [t for t in tasks if t.id.endswith("0")][:n]
    dbs = {t.meta["db_id"]: open_database(t.meta["db_path"], cache_dir=cache) for t in sample}
    cursors = {k: d.connect() for k, d in dbs.items()}

    def per_call_ms(fn) -> float:
        times = []
        for t in sample:
            start = time.perf_counter()
            fn(t)
            times.append(time.perf_counter() - start)
        return round(1000 * statistics.median(times), 3)

    baseline = per_call_ms(lambda t: run_query(cursors[t.meta["db_id"]], t.answer, timeout_s=30,
                                               max_rows=100_000))
    sql_reward._gold_cached.cache_clear()
    cold = per_call_ms(lambda t: sql_reward.execution_match(t.answer, t.answer,
                                                            dbs[t.meta["db_id"]]))
    warm = per_call_ms(lambda t: sql_reward.execution_match(t.answer, t.answer,
                                                            dbs[t.meta["db_id"]]))
    return {"calls": len(sample), "bare_duckdb_query_ms": baseline,
            "execution_match_ms_gold_cached": warm, "execution_match_ms_gold_uncached": cold,
            "cached_over_bare": round(warm / baseline, 2)}


def main() -> dict:
    tasks = load_spider()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        result = {"conversion_all_19_s": round(convert_all(cache), 3)}
        result["attach_vs_convert"] = attach_vs_convert(tasks, cache)
        result["gold_qps"] = gold_qps(tasks, cache)
        result["env_session_ms"] = session_cost(cache)
        result["reward"] = reward_cost(tasks, cache)
        close_databases()
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
