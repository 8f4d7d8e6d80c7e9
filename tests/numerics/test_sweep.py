"""Declarative sweeps: config validation, expansion and keys, the SQLite store, resuming and killing."""

from __future__ import annotations

import copy
import json
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attneb.numerics import estimators, experiments, priors, sweep
from attneb.numerics.sweep import canonical, registry
from tests.processes import alive, children_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "sweeps" / "two_cluster_recovery.toml"

BASE = {
    "name": "tiny",
    "prior": {"family": "GaussianMixture", "means": [[-2.0], [2.0]], "var": 0.25},
    "sigma2": 0.5,
    "n": [32, 48],
    "seeds": [0, 1],
    "estimators": ["two-stage", "stage-two-only", "tweedie-kde", "linear", "oracle"],
    "h2": {"rule": "power", "scale": 0.5, "exponent": 0.25},
    "T": "leading",
    "eta": 0.25,
}


def config(**changes):
    out = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def stable(rows):
    """Rows without the columns that legitimately differ between two executions."""
    return [{k: v for k, v in row.items() if k not in sweep.VOLATILE_COLUMNS} for row in rows]


def child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

BAD = [
    ({"seed": [0]}, "unknown key 'seed' at the top level"),
    ({"name": None}, "name is required"),
    ({"name": ""}, "name == ''"),
    ({"prior": {"family": "Gausian", "mean": 0, "var": 1}}, "prior.family == 'Gausian'"),
    ({"prior": {"mean": 0, "var": 1}}, "prior.family is required"),
    ({"prior": {"family": "Gaussian", "mean": 0, "vars": 1}}, "unknown key 'vars' in prior"),
    ({"prior": {"family": "Gaussian", "mean": 0, "var": -1}}, r"prior.var == -1.0, must be > 0"),
    ({"prior": {"family": "Gaussian", "mean": 0}}, r"prior \(Gaussian\).*var"),
    ({"sigma2": 0}, r"sigma2 == 0.0, must be > 0"),
    ({"sigma2": "big"}, r"sigma2 == 'big' must be a number"),
    ({"sigma2": []}, "sigma2 is an empty list"),
    ({"n": [32, 0]}, r"n\[1\] == 0, must be >= 1"),
    ({"n": [32, 32]}, "n lists 32 more than once"),
    ({"n": [32.5]}, r"n\[0\] == 32.5 must be an integer"),
    ({"seeds": [-1]}, r"seeds\[0\] == -1, must be >= 0"),
    ({"seeds": {"count": 0}}, r"seeds.count == 0"),
    ({"seeds": {"start": 1}}, "seeds.count is required"),
    ({"estimators": ["two-stag"]}, r"estimators\[0\] == 'two-stag' is not a known estimator"),
    ({"estimators": []}, "estimators == \\[\\] must be a non-empty list"),
    ({"h2": None}, "h2 is required by estimator 'two-stage'"),
    ({"h2": -0.1}, r"h2 == -0.1, must be > 0"),
    ({"h2": {"rule": "pow", "scale": 1}}, "h2.rule == 'pow' is not a known rule"),
    ({"h2": {"rule": "power", "scale": 1.0}}, "h2.exponent is required"),
    ({"h2": {"rule": "power", "scale": 1.0, "exponent": 0.2, "offset": 1}}, "unknown key 'offset' in h2"),
    ({"h2": {"rule": "power", "scale": 0.0, "exponent": 0.2}}, r"h2.scale == 0.0, must be > 0"),
    ({"T": "lead"}, "T.rule == 'lead' is not a known rule"),
    ({"T": {"rule": "fixed", "value": -1}}, r"T.value == -1.0, must be >= 0"),
    ({"T": {"rule": "grid", "values": 2.0}}, "T.values == 2.0 must be a list"),
    ({"T": {"rule": "scale"}}, "T.factor is required"),
    ({"eta": 1.5}, r"eta == 1.5, must be <= 1.0"),
    ({"eta": [0.1, 0.0]}, r"eta\[1\] == 0.0, must be > 0"),
    ({"method": "rk4"}, "method == 'rk4' is not a known option"),
    ({"options": {"npmle": {}}}, "options.npmle is given but 'npmle' is not in estimators"),
    ({"options": {"lasso": {}}}, "options.lasso: 'lasso' is not a known estimator"),
    ({"options": {"two-stage": {"bogus": 1}}}, "unknown key 'bogus' in options.two-stage"),
    ({"options": {"two-stage": {"h2": 1.0}}}, r"options.two-stage.h2: 'h2' is set by the sweep itself"),
    ({"mmse": {"n_mc": 1}}, r"mmse.n_mc == 1, must be >= 2"),
    ({"mmse": {"seeds": 1}}, "unknown key 'seeds' in mmse"),
    ({"n": [1, 8], "estimators": ["linear"]}, "estimator 'linear' needs n >= 2"),
]


@pytest.mark.parametrize(("changes", "message"), BAD, ids=[m for _, m in BAD])
def test_invalid_config_names_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        sweep.Experiment.from_dict(config(**changes))


def test_load_experiment_prefixes_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\nsigma2 = 0.5\nn = [8]\nseeds = [0]\nestimators = ["oracle"]\nsigmma = 1\n'
                    '[prior]\nfamily = "Gaussian"\nmean = 0.0\nvar = 1.0\n')  # fmt: skip
    with pytest.raises(ValueError, match=r"bad.toml: unknown key 'sigmma'"):
        sweep.load_experiment(path)
    path.write_text("name = [")
    with pytest.raises(ValueError, match="not valid TOML"):
        sweep.load_experiment(path)


def test_example_config_loads_and_round_trips():
    experiment = sweep.load_experiment(EXAMPLE)
    assert sweep.Experiment.from_dict(experiment.to_dict()) == experiment
    assert len(experiment.runs()) == 4 * 5 * 5


# ---------------------------------------------------------------------------------------------
# Expansion and keys
# ---------------------------------------------------------------------------------------------


def test_expansion_resolves_only_the_hyperparameters_each_estimator_uses():
    experiment = sweep.Experiment.from_dict(
        config(
            sigma2=[0.5, 1.0],
            h2=[0.1, 0.2],
            T={"rule": "scale", "factor": [0.5, 1.0]},
            method=["euler", "ode"],
            eta=[0.1, 0.2],
            estimators=["two-stage", "tweedie-kde", "stage-two-only", "oracle"],
        )
    )
    assert sweep.Experiment.from_dict(experiment.to_dict()) == experiment
    runs = experiment.runs()
    points = 2 * 2 * 2  # sigma2 x n x seeds
    two_stage = 2 * 2 * (2 + 1)  # h2 x T x (euler: 2 eta, ode: no eta)
    assert len(runs) == points * (two_stage + 2 + 1 + 1)
    assert len({r.key for r in runs}) == len(runs)
    by = {name: [r for r in runs if r.estimator == name] for name in experiment.estimators}
    assert all(r.h2 is r.T is r.eta is r.method is None for r in by["stage-two-only"] + by["oracle"])
    assert all(r.T is None and r.h2 in (0.1, 0.2) for r in by["tweedie-kde"])
    assert all((r.eta is None) == (r.method == "ode") for r in by["two-stage"])
    leading = {(r.sigma2, r.h2): r.T for r in by["two-stage"] if r.T == r.sigma2 / (2 * r.h2)}
    assert len(leading) == 4
    assert {r.T for r in by["two-stage"] if r.sigma2 == 0.5 and r.h2 == 0.1} == {1.25, 2.5}


def test_power_rule_and_fixed_T():
    runs = sweep.Experiment.from_dict(config(estimators=["two-stage"], T=3.0, seeds=[0])).runs()
    assert [(r.n, r.h2, r.T) for r in runs] == [
        (32, float(f"{0.5 * 32**-0.25:.12g}"), 3.0),
        (48, float(f"{0.5 * 48**-0.25:.12g}"), 3.0),
    ]
    grid = sweep.Experiment.from_dict(config(estimators=["two-stage"], T=[0.0, 1.0], seeds=[0], n=[32])).runs()
    assert [r.T for r in grid] == [0.0, 1.0]


def test_same_numbers_same_key():
    a = sweep.Experiment.from_dict(config(sigma2=1, prior={"family": "Gaussian", "mean": 0, "var": 2})).runs()
    b = sweep.Experiment.from_dict(config(sigma2=1.0, prior={"family": "Gaussian", "mean": [0.0], "var": 2.0})).runs()
    assert [r.key for r in a] == [r.key for r in b]
    c = sweep.Experiment.from_dict(config(name="other")).runs()
    assert not {r.key for r in c} & {r.key for r in sweep.Experiment.from_dict(config()).runs()}


def test_golden_key():
    """The canonical form is part of the store format: changing it orphans every stored row."""
    spec = sweep.RunSpec(
        experiment="golden",
        prior={"family": "Gaussian", "mean": [0.0], "var": 1.0},
        sigma2=0.5, n=128, seed=7, estimator="two-stage", h2=0.1, T=2.5, eta=0.05, method="euler",
    )  # fmt: skip
    assert spec.key == "eac15597767ca5acd6dbffb5b0ac3a55e9426a3889755c3102967577be24228b"


def test_keys_are_the_same_in_another_process():
    experiment = sweep.Experiment.from_dict(config())
    code = (
        "import json, sys\nfrom numerics import sweep\n"
        "e = sweep.Experiment.from_dict(json.load(sys.stdin))\n"
        "print(json.dumps([r.key for r in e.runs()]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(config()), capture_output=True, text=True,
        env=child_env(), check=True, timeout=60,
    )  # fmt: skip
    assert json.loads(out.stdout) == [r.key for r in experiment.runs()]


@given(
    sigma2=st.floats(1e-6, 1e6),
    h2=st.floats(1e-6, 1e6),
    T=st.floats(0, 1e6),
    n=st.integers(1, 10**6),
    seed=st.integers(0, 2**63),
)
def test_spec_json_round_trip(sigma2, h2, T, n, seed):
    spec = sweep.RunSpec("e", {"family": "Laplace", "scale": 1.0, "dim": 2}, sigma2, n, seed, "tweedie-kde", h2=h2, T=T)
    back = sweep.RunSpec.from_json(spec.to_json())
    assert back == spec and back.key == spec.key
    assert pickle.loads(pickle.dumps(spec)).key == spec.key


def test_canonical_json_is_sorted_compact_json_of_plain_values():
    value = {"b": np.float64(0.1), "a": (np.int64(3), np.array([1.5, 2.0])), "c": {"z": None, "y": [np.float32(0.5)]}}
    plain = canonical.plain(value)
    assert plain == {"b": 0.1, "a": [3, [1.5, 2.0]], "c": {"z": None, "y": [0.5]}}
    assert type(plain["b"]) is float and type(plain["a"][0]) is int
    assert canonical.canonical_json(value) == '{"a":[3,[1.5,2.0]],"b":0.1,"c":{"y":[0.5],"z":null}}'
    with pytest.raises(ValueError):
        canonical.canonical_json({"x": float("nan")})


def test_build_prior_makes_the_family_with_its_parameters():
    families = {"Discrete", "Gaussian", "GaussianMixture", "Laplace", "StudentT", "UniformBox", "UniformSphere"}
    assert registry.prior_families() == {name: getattr(priors, name) for name in families}
    prior = registry.build_prior({"family": "GaussianMixture", "means": [[-2.0], [2.0]], "var": 0.25})
    assert isinstance(prior, priors.GaussianMixture) and prior.component_var == 0.25
    np.testing.assert_array_equal(prior.means, [[-2.0], [2.0]])
    built = sweep.RunSpec("e", {"family": "Laplace", "scale": 1.5, "dim": 2}, 0.5, 16, 0, "oracle").build_prior()
    assert isinstance(built, priors.Laplace) and (built.scale, built.dim) == (1.5, 2)


def test_runs_of_one_batch_share_its_key():
    runs = sweep.Experiment.from_dict(config()).runs()
    batches = {}
    for run in runs:
        batches.setdefault(run.batch_key, set()).add((canonical.canonical_json(run.prior), run.sigma2, run.n, run.seed))
    assert all(len(batch) == 1 for batch in batches.values())
    assert len(batches) == len({(run.n, run.seed) for run in runs}) == 4


# ---------------------------------------------------------------------------------------------
# Runs and rows
# ---------------------------------------------------------------------------------------------


def test_rows_agree_with_risk_records():
    experiment = sweep.Experiment.from_dict(config(n=[40], seeds=[3], h2=0.2, T=1.0))
    rows = {r["estimator"]: r for r in sweep.run_batch(experiment.runs())}
    prior = priors.GaussianMixture([[-2.0], [2.0]], var=0.25)
    reference = {
        "two-stage": estimators.TwoStageDenoiser(0.5, 0.2, T=1.0, eta=0.25),
        "stage-two-only": estimators.StageTwoOnly(0.5),
        "tweedie-kde": estimators.TweedieKDE(0.5, 0.2),
        "linear": estimators.LinearShrinkage(0.5),
        "oracle": estimators.OracleBayes(prior, 0.5),
    }
    for record in experiments.risk_records(reference, prior, 0.5, 40, [3]):
        row = rows[record.estimator]
        assert (row["mse"], row["gap"]) == (record.mse, record.gap)
        assert (row["oos_mse"], row["oos_gap"]) == (record.oos_mse, record.oos_gap)
        assert row["excess"] == row["mse"] - row["mmse"] and row["oos_excess"] == row["oos_mse"] - row["mmse"]
    mmse = prior.mmse(0.5)
    assert rows["oracle"]["gap"] == 0.0 and rows["oracle"]["oos_gap"] == 0.0 and rows["oracle"]["mmse"] == mmse.value
    assert rows["oracle"]["mmse_method"] == "quadrature" and rows["oracle"]["mmse_error"] == mmse.error
    assert rows["two-stage"]["n_layers"] == 4 and rows["linear"]["n_layers"] is None
    assert sweep.run_one(experiment.runs()[0]) | {"runtime_s": 0, "finished_at": 0} == rows[
        experiment.runs()[0].estimator
    ] | {"runtime_s": 0, "finished_at": 0}
    assert set(rows["oracle"]) == {name for name, _ in sweep.COLUMNS} - {"code"}  # the store writes its code


def test_out_of_sample_queries_are_fresh_seeded_draws_outside_the_context():
    prior = priors.GaussianMixture([[-2.0], [2.0]], var=0.25)
    clean, noisy = experiments.draw_batch(prior, 0.5, 200, 3)
    q_clean, q_noisy = experiments.draw_queries(prior, 0.5, 200, 3)
    again = experiments.draw_queries(prior, 0.5, 200, 3)
    assert np.array_equal(again[1], q_noisy) and np.array_equal(again[0], q_clean)
    assert not np.isin(q_clean, clean).any() and not np.isin(q_noisy, noisy).any()
    assert not np.array_equal(experiments.draw_queries(prior, 0.5, 200, 4)[1], q_noisy)
    # the batch of a seed is what it was before the queries existed: default_rng(seed) alone
    rng = np.random.default_rng(3)
    assert np.array_equal(clean, prior.sample(200, rng))
    # the clean-context step attends over the clean draws; its fresh queries are denoised by the same fit
    experiment = sweep.Experiment.from_dict(config(estimators=["clean-context"], n=[64], seeds=[3]))
    [row] = sweep.run_batch(experiment.runs())
    est = estimators.StageTwoOnly(0.5).fit(experiments.draw_batch(prior, 0.5, 64, 3)[0])
    q_clean, q_noisy = experiments.draw_queries(prior, 0.5, 64, 3)
    oos = est.denoise(q_noisy)
    assert row["oos_mse"] == pytest.approx(np.mean((oos - q_clean) ** 2), rel=1e-12)
    assert row["oos_gap"] == pytest.approx(np.mean((oos - prior.posterior_mean(q_noisy, 0.5)) ** 2), rel=1e-12)


def test_a_store_of_another_schema_version_is_refused(tmp_path):
    conn = sqlite3.connect(tmp_path / "old.sqlite")
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    with pytest.raises(ValueError, match="schema version 1; this attneb writes 3: start a fresh store"):
        sweep.ResultStore(tmp_path / "old.sqlite")


def test_monte_carlo_mmse_is_seeded():
    means = [[0.0, 1.0], [1.0, 0.0]]  # 2-D mixture: Monte Carlo MMSE
    cfg = config(prior={"family": "GaussianMixture", "means": means, "var": 0.1}, estimators=["oracle"], n=[16])
    cfg["mmse"] = {"n_mc": 500, "seed": 4}
    runs = sweep.Experiment.from_dict(cfg).runs()
    row = sweep.run_one(runs[0])
    expected = priors.GaussianMixture(means, var=0.1).mmse(0.5, rng=np.random.default_rng(4), n_mc=500)
    assert row["mmse_method"] == "monte-carlo"
    assert (row["mmse"], row["mmse_error"]) == (expected.value, expected.error)
    assert json.loads(row["spec"])["mmse_seed"] == 4


def test_failed_run_is_named_and_earlier_rows_are_kept(tmp_path, monkeypatch):
    class Boom(estimators.StageTwoOnly):
        def _fit(self, noisy):
            if noisy.shape[0] == 32:
                raise FloatingPointError("boom")
            super()._fit(noisy)

    monkeypatch.setitem(sweep.ESTIMATORS, "boom", sweep.EstimatorEntry("boom", lambda: Boom))
    experiment = sweep.Experiment.from_dict(config(estimators=["boom"], seeds=[0]))
    with sweep.ResultStore(tmp_path / "s.db") as store:
        message = r"boom GaussianMixture sigma2=0.5 n=32 seed=0\) failed: FloatingPointError: boom"
        with pytest.raises(sweep.RunFailed, match=message):
            sweep.run_sweep(experiment, store, progress=False)
        assert [r["n"] for r in store.rows()] == [48]  # largest n runs first


# ---------------------------------------------------------------------------------------------
# Store and sweeps
# ---------------------------------------------------------------------------------------------


def test_iter_results_yields_every_task_with_its_rows():
    tasks = [[spec] for spec in sweep.Experiment.from_dict(config(n=[32], estimators=["linear", "oracle"])).runs()]
    expected = [stable(sweep.run_batch(task)) for task in tasks]
    with ThreadPoolExecutor(2) as pool:
        for executor in (None, pool):
            done = list(sweep.runner.iter_results(tasks, executor=executor))
            assert sorted(map(id, (task for task, _ in done))) == sorted(map(id, tasks))
            assert all(stable(rows) == expected[tasks.index(task)] for task, rows in done)


def test_rerun_skips_finished_runs(tmp_path):
    path = tmp_path / "store.sqlite"
    experiment = sweep.Experiment.from_dict(config())
    first = sweep.run_sweep(experiment, path, progress=False)
    assert (first.total, first.skipped, first.ran) == (20, 0, 20)
    again = sweep.run_sweep(experiment, path, progress=True)  # no terminal: tqdm stays silent
    assert (again.total, again.skipped, again.ran) == (20, 20, 0)
    wider = sweep.Experiment.from_dict(config(seeds=[0, 1, 2]))
    more = sweep.run_sweep(wider, path, progress=False)
    assert (more.total, more.skipped, more.ran) == (30, 20, 10)
    with sweep.ResultStore(path) as store:
        assert len(store) == 30 and store.finished_keys("tiny") == {r.key for r in wider.runs()}
        assert store.finished_keys("nothing") == set() and store.integrity_check() == "ok"
        assert store.add(store.rows()[:3]) == 0  # INSERT OR IGNORE: first row wins
        journal = store._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert journal == "wal"


def test_rows_do_not_depend_on_how_runs_are_executed(tmp_path):
    experiment = sweep.Experiment.from_dict(config())
    serial = sweep.run_sweep(experiment, tmp_path / "serial.db", progress=False)
    with ThreadPoolExecutor(3) as pool:  # any concurrent.futures.Executor (e.g. dask's get_executor())
        threaded = sweep.run_sweep(experiment, tmp_path / "threads.db", executor=pool, max_in_flight=2, progress=False)
    pooled = sweep.run_sweep(experiment, tmp_path / "pool.db", workers=2, progress=False)
    assert serial.ran == threaded.ran == pooled.ran == 20
    rows = [stable(sweep.ResultStore(tmp_path / f"{name}.db").rows()) for name in ("serial", "threads", "pool")]
    assert rows[0] == rows[1] == rows[2] and len(rows[0]) == 20


def test_csv_round_trip(tmp_path):
    experiment = sweep.Experiment.from_dict(config(n=[32]))
    with sweep.ResultStore(tmp_path / "s.db") as store:
        sweep.run_sweep(experiment, store, progress=False)
        sweep.run_sweep(sweep.Experiment.from_dict(config(name="other", n=[32], seeds=[5])), store, progress=False)
        assert store.to_csv(tmp_path / "all.csv") == 15
        assert store.to_csv(tmp_path / "tiny.csv", experiment="tiny") == 10
        assert sweep.ResultStore.read_csv(tmp_path / "tiny.csv") == store.rows("tiny")
        assert sweep.ResultStore.read_csv(tmp_path / "all.csv") == store.rows()
    header = (tmp_path / "tiny.csv").read_text().splitlines()[0]
    assert header == ",".join(name for name, _ in sweep.COLUMNS)


def test_sweep_file_runs_and_exports(tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(
        'name = "file"\nsigma2 = 0.5\nn = [16]\nseeds = [0, 1]\nestimators = ["oracle", "linear"]\n'
        '[prior]\nfamily = "Laplace"\nscale = 1.0\ndim = 1\n'
    )  # fmt: skip
    summary = sweep.sweep_file(cfg, tmp_path / "s.db", csv_path=tmp_path / "out.csv", progress=False)
    assert (summary.ran, summary.skipped) == (4, 0) and "4 ran" in str(summary)
    assert len(sweep.ResultStore.read_csv(tmp_path / "out.csv")) == 4


def test_clean_context_attends_over_the_clean_draws(tmp_path):
    experiment = sweep.Experiment.from_dict(config(estimators=["clean-context", "stage-two-only"], n=[64], seeds=[3]))
    sweep.run_sweep(experiment, tmp_path / "s.db", progress=False)
    with sweep.ResultStore(tmp_path / "s.db") as store:
        rows = {r["estimator"]: r for r in store.rows()}
    prior = experiment.runs()[0].build_prior()
    clean, noisy = experiments.draw_batch(prior, experiment.runs()[0].sigma2, 64, 3)
    est = estimators.StageTwoOnly(experiment.runs()[0].sigma2).fit(clean).denoise(noisy)
    assert rows["clean-context"]["mse"] == pytest.approx(np.mean((est - clean) ** 2), rel=1e-12)
    assert rows["clean-context"]["mse"] != rows["stage-two-only"]["mse"]


def test_store_gives_back_what_was_added(tmp_path):
    experiment = sweep.Experiment.from_dict(config(n=[32], seeds=[0], estimators=["linear", "oracle"]))
    rows = sweep.run_batch(experiment.runs())
    store = sweep.ResultStore(tmp_path / "s.db")
    assert store.add(rows) == 2
    back = {row["key"]: row for row in store.rows()}
    assert back == {row["key"]: row | {"code": store.code} for row in rows}
    store.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        store.rows()


def test_records_keep_the_first_write_and_survive_reopening(tmp_path):
    with sweep.ResultStore(tmp_path / "s.db") as store:
        assert store.add_record("E", "k1", {"x": np.arange(3.0), "n": 5})
        assert not store.add_record("E", "k1", {"x": [9.0]})
        assert store.add_record("F", "k2", {"y": None})
    with sweep.ResultStore(tmp_path / "s.db") as store:
        assert store.records("E") == {"k1": {"n": 5, "x": [0.0, 1.0, 2.0]}}
        assert store.records("missing") == {}
        assert store.record_keys("E") == {"k1"} and store.record_keys("missing") == set()
        assert len(store) == 0 and store.integrity_check() == "ok"


def test_npmle_runs(tmp_path):
    experiment = sweep.Experiment.from_dict(config(estimators=["npmle"], n=[32], seeds=[0]))
    summary = sweep.run_sweep(experiment, tmp_path / "s.db", progress=False)
    assert summary.ran == 1


# ---------------------------------------------------------------------------------------------
# Interruption
# ---------------------------------------------------------------------------------------------

# A sweep of 16 tasks of ~0.1 s each (one two-stage run and one oracle run per seed).
KILL_CONFIG = config(
    name="kill",
    n=[300],
    seeds={"count": 16},
    estimators=["two-stage", "oracle"],
    h2=0.1,
    T=2.5,
    eta=0.1,
)
CHILD = """
import json, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal, even if started in the background
from attneb.numerics import sweep
experiment = sweep.Experiment.from_dict(json.loads(sys.argv[1]))
sweep.run_sweep(experiment, sys.argv[2], workers=int(sys.argv[3]), progress=False)
"""


def start_child(store: Path, workers: int, cfg=KILL_CONFIG) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(cfg), str(store), str(workers)],
        env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def count_rows(path: Path) -> int:
    if not path.exists():
        return 0
    conn = sqlite3.connect(path, timeout=30)
    try:
        return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:  # table not created yet
        return 0
    finally:
        conn.close()


def wait_for_rows(proc: subprocess.Popen, path: Path, at_least: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while count_rows(path) < at_least:
        if proc.poll() is not None:
            pytest.fail(f"sweep ended early (rc {proc.returncode}): {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {at_least} rows after {timeout} s")
        time.sleep(0.02)


def check_resume(tmp_path: Path, path: Path, rows_after_stop: int) -> None:
    """The store is sound, holds whole rows only, and resuming gives an uninterrupted run's rows."""
    experiment = sweep.Experiment.from_dict(KILL_CONFIG)
    with sweep.ResultStore(path) as store:
        assert store.integrity_check() == "ok"
        assert len(store) == rows_after_stop
        assert all(r["mse"] is not None and r["spec"] for r in store.rows())
        resumed = sweep.run_sweep(experiment, store, progress=False)
        assert (resumed.skipped, resumed.ran) == (rows_after_stop, 32 - rows_after_stop)
        final = stable(store.rows())
    reference = sweep.run_sweep(experiment, tmp_path / "reference.db", progress=False)
    assert reference.ran == 32
    assert final == stable(sweep.ResultStore(tmp_path / "reference.db").rows())


def test_kill_and_resume(tmp_path):
    path = tmp_path / "killed.sqlite"
    proc = start_child(path, workers=1)
    wait_for_rows(proc, path, at_least=6)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    rows = count_rows(path)
    assert 6 <= rows < 32 and rows % 2 == 0  # whole tasks: a seed's two runs land together
    check_resume(tmp_path, path, rows)


def test_ctrl_c_stops_and_resumes(tmp_path):
    path = tmp_path / "interrupted.sqlite"
    proc = start_child(path, workers=1)
    wait_for_rows(proc, path, at_least=4)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    check_resume(tmp_path, path, count_rows(path))


def spawned_workers(pid: int) -> list[int]:
    """The children of ``pid`` that multiprocessing spawned as workers (``--multiprocessing-fork`` ends their command)."""
    workers = []
    for child in children_of(pid):
        try:
            if b"--multiprocessing-fork" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0"):
                workers.append(child)
        except FileNotFoundError:  # ended since it was listed
            pass
    return workers


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to find worker processes")
@pytest.mark.parametrize(
    "sig", [signal.SIGKILL, pytest.param(signal.SIGINT, marks=pytest.mark.slow)], ids=["SIGKILL", "SIGINT"]
)
def test_pool_interrupted_leaves_no_workers(tmp_path, sig):
    path = tmp_path / "pool.sqlite"
    proc = start_child(path, workers=2)
    wait_for_rows(proc, path, at_least=4)
    workers = spawned_workers(proc.pid)
    # the pool's two workers, seen running (an empty list would make the check below pass on nothing)
    assert len(workers) == 2 and all(alive(p) for p in workers), children_of(proc.pid)
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in workers), "worker processes outlived the sweep"
    check_resume(tmp_path, path, count_rows(path))


def test_runs_on_a_grid_of_depths_share_stage_one_and_give_the_rows_of_their_own_runs():
    experiment = sweep.Experiment.from_dict(config(n=[64], seeds=[3], estimators=["two-stage", "linear"],
                                                   h2=0.25, T={"rule": "grid", "values": [1.1, 1.15, 1.2, 1.3]}))
    specs = experiment.runs()
    tasks = sweep.runner._tasks(specs)
    assert len(tasks) == 1 and len(tasks[0]) == 5  # the linear run and the four depths: one Stage-1 unit
    together = {row["key"]: row for row in stable(sweep.run_batch(tasks[0]))}
    for spec in specs:
        assert stable([sweep.run_one(spec)]) == [together[spec.key]]
    assert {s.path_key for s in specs if s.estimator == "linear"} == {None}
