"""Hyperparameter tuning in a job spec (AI Platform's `hyperparameters`, Vertex AI's `studySpec`)
as an experiment's sweep, and its parallel trials as AI Platform runs them: each trial on a
cluster of its own, here a share of the stack's nodes."""

from __future__ import annotations

from typing import Any

from infra.errors import ConfigError

SCALES = {"UNIT_LINEAR_SCALE": "LINEAR", "UNIT_LOG_SCALE": "LOG", "SCALE_TYPE_UNSPECIFIED": "LINEAR"}
ALGORITHMS = {"ALGORITHM_UNSPECIFIED": "tpe", "RANDOM_SEARCH": "random"}
EARLY_STOPPING = ("medianAutomatedStoppingSpec", "decayCurveStoppingSpec", "convexAutomatedStoppingSpec")


def _refuse(where: str, why: str) -> ConfigError:
    return ConfigError(f"{where}: {why}")


def _scale(param: dict[str, Any], where: str) -> str:
    """A parameter's scale (studySpec and AI Platform's hyperparameters share the names)."""
    scale = SCALES.get(param.get("scaleType", "UNIT_LINEAR_SCALE"))
    if scale is None:
        raise _refuse(where, f"scaleType {param['scaleType']} is not offered; use UNIT_LINEAR_SCALE "
                             "or UNIT_LOG_SCALE")
    return scale


def _algorithm(spec: dict[str, Any], where: str) -> str:
    algorithm = spec.get("algorithm", "ALGORITHM_UNSPECIFIED")
    if algorithm not in ALGORITHMS:
        raise _refuse(where, f"{algorithm} is not offered; use ALGORITHM_UNSPECIFIED (Bayesian, "
                             "here TPE) or RANDOM_SEARCH")
    return ALGORITHMS[algorithm]


def study_sweep(study: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """A Vertex AI HyperparameterTuningJob's studySpec (with its trial counts) as a sweep."""
    metrics = study.get("metrics") or []
    if len(metrics) != 1:
        raise _refuse("studySpec.metrics", f"{len(metrics)} metrics; trainctl tunes exactly one")
    params = []
    for p in study.get("parameters") or []:
        pid, where = p.get("parameterId"), f"studySpec.parameters[{p.get('parameterId')}]"
        scale = _scale(p, where)
        if p.get("conditionalParameterSpecs"):
            raise _refuse(where, "conditionalParameterSpecs are not offered (every parameter is searched on "
                                 "every trial); move the conditional parameters into the main list")
        if "doubleValueSpec" in p:
            params.append({"name": pid, "type": "DOUBLE", "min": p["doubleValueSpec"]["minValue"],
                           "max": p["doubleValueSpec"]["maxValue"], "scale": scale})
        elif "integerValueSpec" in p:
            params.append({"name": pid, "type": "INTEGER", "min": int(p["integerValueSpec"]["minValue"]),
                           "max": int(p["integerValueSpec"]["maxValue"]), "scale": scale})
        elif "categoricalValueSpec" in p:
            params.append({"name": pid, "type": "CATEGORICAL", "values": p["categoricalValueSpec"]["values"]})
        elif "discreteValueSpec" in p:
            params.append({"name": pid, "type": "CATEGORICAL", "values": p["discreteValueSpec"]["values"]})
        else:
            raise _refuse(where, "needs a doubleValueSpec, integerValueSpec, categoricalValueSpec or "
                                 "discreteValueSpec")
    sweep = {"metric": metrics[0]["metricId"], "goal": metrics[0]["goal"], "parameters": params,
             "algorithm": _algorithm(study, "studySpec.algorithm"), "max_trials": int(job.get("maxTrialCount", 6)),
             "max_parallel_trials": int(job.get("parallelTrialCount", 1)), "parallel_mode": "sequential"}
    if any(k in study for k in EARLY_STOPPING):
        sweep["pruner"] = "median"
    return sweep


def hyperparameters_sweep(hp: dict[str, Any]) -> dict[str, Any]:
    """AI Platform's HyperparameterSpec as a sweep."""
    algorithm = _algorithm(hp, "hyperparameters.algorithm")
    params = []
    for p in hp.get("params") or []:
        where = f"hyperparameters.params[{p.get('parameterName')}]"
        scale = _scale(p, where)
        kind = p.get("type")
        if kind in ("DOUBLE", "INTEGER"):
            params.append({"name": p["parameterName"], "type": kind, "min": p["minValue"],
                           "max": p["maxValue"], "scale": scale})
        elif kind == "CATEGORICAL":
            params.append({"name": p["parameterName"], "type": "CATEGORICAL", "values": p["categoricalValues"]})
        elif kind == "DISCRETE":
            params.append({"name": p["parameterName"], "type": "CATEGORICAL", "values": p["discreteValues"]})
        else:
            raise _refuse(where, f"type {kind!r}: DOUBLE, INTEGER, CATEGORICAL or DISCRETE")
    if hp.get("resumePreviousJobId"):
        raise _refuse("hyperparameters.resumePreviousJobId", "resume a sweep with `trainctl run "
                                                              "--resume <sweep-id>` instead")
    sweep = {"metric": hp.get("hyperparameterMetricTag", "training/hptuning/metric"),
             "goal": hp.get("goal", "MAXIMIZE"), "parameters": params, "algorithm": algorithm,
             "max_trials": int(hp.get("maxTrials", 1)), "max_parallel_trials": int(hp.get("maxParallelTrials", 1)),
             "parallel_mode": "sequential"}
    if hp.get("enableTrialEarlyStopping"):
        sweep["pruner"] = "median"
    return sweep


def parallel_trials(experiment: dict[str, Any], notes: list[str]) -> None:
    """AI Platform and Vertex run each parallel trial on a cluster of its own. A one-node trial
    (a single chief) gets a node of its own here too: the stack gets one node per parallel trial
    and the sweep splits them. A trial with worker pools runs alone (a pooled cluster is not
    split between trials): said in a note."""
    sweep = experiment["sweep"]
    parallel = min(sweep["max_parallel_trials"], sweep["max_trials"])
    sweep["max_parallel_trials"] = parallel
    if parallel <= 1:
        return
    pools = experiment["overrides"]["pools"]
    if len(pools) == 1 and pools[0]["count"] == 1:
        chief = experiment["overrides"].pop("pools")[0]
        experiment["overrides"].update({k: v for k, v in chief.items() if k in ("machine_type", "gpu", "spot")})
        experiment["overrides"]["nodes"] = parallel
        sweep["parallel_mode"] = "split"
        notes.append(f"{parallel} trials at once, each on a node of its own (as each trial gets its own "
                     f"machine on Google Cloud): the stack gets {parallel} nodes")
        return
    sweep["max_parallel_trials"] = 1
    notes.append(f"{parallel} parallel trials asked for; they run one at a time: each trial's cluster has "
                 f"{len(pools)} worker pools, and trainctl does not split a pooled cluster between trials")
