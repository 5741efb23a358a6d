"""The figures of `asynctrain bench async`, computed from the curves its runs report: a run's
summary, ours against a synchronous reference (throughput, time to the target AUC, AUC at equal
examples), a remedy against its baseline, and what a disruption cost ours.

Pure functions of the runs' JSON: our side (`async_ours`) and the references' (`sync_reference`)
report curves; this module turns them into the report's comparisons.
"""

from __future__ import annotations

from asynctrain.benchmarks import async_scenarios


def summarize(curve: list[dict], untrained: dict, counters: dict, steps: int) -> dict:
    """A strategy's figures for one scenario from its curve."""
    final = curve[-1]
    link_bytes = sum(sum(c['link_bytes'].values()) for c in counters.values())
    return {
        'curve': curve,
        'untrained_held_out_loss': untrained['loss'],
        'held_out_loss': final['held_out_loss'],
        'held_out_auc': final['held_out_auc'],
        'examples_per_sec': final['examples'] / final['wall_s'],
        'wall_s': final['wall_s'],
        'hosts': counters,
        'link_bytes': link_bytes,
        'steps': steps,
        # None where no link carried the run (the synchronous reference's hosts are not proxied).
        'link_bytes_per_step': link_bytes / steps if link_bytes else None,
    }


# The target AUC: the synchronous reference's final held-out AUC less this (issue's goal: "wall
# time to a target eval AUC, the synchronous run's final AUC minus 0.005").
TARGET_AUC_MARGIN = 0.005


def time_to_auc(curve: list[dict], target: float) -> float | None:
    """Wall seconds to the first scored round whose held-out AUC reaches `target`; None if none."""
    for point in curve:
        if point['held_out_auc'] >= target:
            return point['wall_s']
    return None


def compare(ours: dict, reference: dict, name: str) -> dict:
    """Ours against the synchronous reference `name` in one scenario: throughput ratio, the wall
    time each took to the target AUC, and the AUC gap at the examples both trained on (their
    rounds see as many examples each)."""
    target = reference['held_out_auc'] - TARGET_AUC_MARGIN
    ours_to, reference_to = (
        time_to_auc(ours['curve'], target),
        time_to_auc(reference['curve'], target),
    )
    at_equal = [
        (mine['examples'], mine['held_out_auc'] - theirs['held_out_auc'])
        for mine, theirs in zip(ours['curve'], reference['curve'])
        if mine['examples'] == theirs['examples']
    ]
    return {
        'examples_per_sec_ratio': ours['examples_per_sec'] / reference['examples_per_sec'],
        'target_auc': target,
        'seconds_to_target': {'ours': ours_to, name: reference_to},
        # Seconds the reference took over ours (> 1: ours got there sooner); None unless both did.
        'to_target_ratio': reference_to / ours_to if ours_to and reference_to else None,
        'auc_gap_at_equal_examples': [
            {'examples': examples, 'ours_minus_sync': gap} for examples, gap in at_equal
        ],
    }


def against_baseline(remedy: dict, baseline: dict) -> dict:
    """A remedy's run against its baseline's (same hosts, as many examples): the AUC and loss
    differences at the end and at every round, and the ratios of examples/s, bytes per step
    and mean staleness."""
    return {
        'held_out_auc_minus_baseline': remedy['held_out_auc'] - baseline['held_out_auc'],
        'held_out_loss_minus_baseline': remedy['held_out_loss'] - baseline['held_out_loss'],
        'auc_minus_baseline_by_round': [
            mine['held_out_auc'] - theirs['held_out_auc']
            for mine, theirs in zip(remedy['curve'], baseline['curve'])
        ],
        'examples_per_sec_ratio': remedy['examples_per_sec'] / baseline['examples_per_sec'],
        'link_bytes_per_step_ratio': (
            remedy['link_bytes_per_step'] / baseline['link_bytes_per_step']
            if remedy['link_bytes_per_step'] and baseline['link_bytes_per_step']
            else None
        ),
        'staleness_mean': {
            'remedy': _mean(p['staleness_mean'] for p in remedy['curve']),
            'baseline': _mean(p['staleness_mean'] for p in baseline['curve']),
        },
    }


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def lost_throughput(disrupted: dict, equal: dict) -> dict:
    """What a disruption cost ours: its examples/s against the undisrupted `equal` run's, over
    the whole run and over the rounds from the disruption on, and the AUC it ended with; for a
    run that did not finish, how it ended."""
    if not disrupted['completed']:
        return {'outcome': disrupted['outcome']}
    start = async_scenarios.disruption_round(len(disrupted['curve']))

    def rate_from(curve):
        before = curve[start - 1]
        return (curve[-1]['examples'] - before['examples']) / (
            curve[-1]['wall_s'] - before['wall_s']
        )

    return {
        'examples_per_sec_ratio': disrupted['examples_per_sec'] / equal['examples_per_sec'],
        'from_disruption_ratio': rate_from(disrupted['curve']) / rate_from(equal['curve']),
        'held_out_auc_minus_equal': disrupted['held_out_auc'] - equal['held_out_auc'],
    }


def costs_and_remedies(names: list[str], scenarios: dict) -> tuple[dict, dict]:
    """Per disrupted scenario (when `equal` ran), `lost_throughput`; per remedy variant (when its
    baseline ran and both finished), `against_baseline`."""
    losses = {
        name: lost_throughput(scenarios[name]['ours'], scenarios['equal']['ours'])
        for name in names
        if async_scenarios.SCENARIOS[name].disrupted and 'equal' in scenarios
    }
    remedies = {
        name: against_baseline(scenarios[name]['ours'], scenarios[baseline]['ours'])
        for name in names
        if (baseline := async_scenarios.SCENARIOS[name].baseline) in scenarios
        and scenarios[name]['ours']['completed']
        and scenarios[baseline]['ours']['completed']
    }
    return losses, remedies
