"""Print what driver.py recorded: per request, per turn, per run, side by side.

Words used in the tables:

- prompt: the tokens of the request's prompt (cached + evaluated);
- cached: reused from the server's KV cache (llama-server's ``cache_n``);
- evaluated: read anew (``prompt_n``, Ollama's ``prompt_eval_count``), the
  cost of the request before generation;
- generated: tokens written (``predicted_n``);
- floor: what the server must evaluate for the turn no matter how the prompt
  is laid out: the user's new message, the live facts the turn needs (the
  state lines of the entities it is about, a remembered preference), the
  tool results, and the chat template's tokens around those messages and
  each request's generation prompt (measured with /apply-template and
  /tokenize on the same server).
- steady state: the turns after the first of a session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

type Run = dict[str, Any]


@dataclass
class Totals:
    """Sums over a set of turns."""

    turns: int = 0
    requests: int = 0
    prompt: int = 0
    cached: int = 0
    evaluated: int = 0
    generated: int = 0
    seconds: float = 0.0
    floor: int = 0

    @property
    def reuse(self) -> float:
        """Cached share of all prompt tokens."""
        return self.cached / self.prompt if self.prompt else 0.0

    @property
    def over_floor(self) -> float:
        """Evaluated tokens per token of floor."""
        return self.evaluated / self.floor if self.floor else 0.0


def turns(run: Run) -> list[tuple[int, dict[str, Any], bool]]:
    """Return (number, step, first of its session) for every model turn."""
    result = []
    first = True
    for number, step in enumerate(run["steps"], 1):
        if step["kind"] == "command" and step["text"] == "/new":
            first = True
        if step["kind"] == "say":
            result.append((number, step, first))
            first = False
    return result


def totals(run: Run, *, steady: bool = False) -> Totals:
    """Sum the turns of a run (only steady-state ones with ``steady``)."""
    total = Totals()
    for _, step, first in turns(run):
        if steady and first:
            continue
        total.turns += 1
        total.floor += step["floor"]
        total.seconds += step["seconds"]
        for request in step["requests"]:
            total.requests += 1
            total.prompt += request["prompt_tokens"]
            total.cached += request["cache_n"]
            total.evaluated += request["prompt_n"]
            total.generated += request["predicted_n"]
    return total


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _step_label(step: dict[str, Any]) -> str:
    if step["kind"] == "press":
        return f"[press {step['text']}]"
    forced = " + ".join(name for calls in step["forced"] for name in calls)
    label = step["text"]
    return f"{label} [{forced}]" if forced else label


def _request_line(index: int, request: dict[str, Any], cap: int) -> str:
    what = []
    if request["forced"]:
        what.append(f"forced {', '.join(request['forced'])}")
    elif request["tool_calls"]:
        what.append(f"model called {', '.join(request['tool_calls'])}")
    if request["stop_type"] == "limit":
        what.append(
            f"stopped at the {cap}-token cap" if request["capped"] else "num_predict"
        )
    if request["stop_type"] == "closed":
        what.append("stopped by the integration: a loop")
    if request["error"]:
        what.append(f"ERROR {request['error'][:60]}")
    rewrote = request.get("rewrote", "")
    # Where the prompt changed bytes the server had cached (not only added).
    broke = f"\n           cache broke at: {repr(rewrote)[1:-1]}" if rewrote else ""
    return (
        f"        {index}: prompt {request['prompt_tokens']:5d} = cached "
        f"{request['cache_n']:5d} + evaluated {request['prompt_n']:5d}; generated "
        f"{request['predicted_n']:4d}; {request['seconds']:5.1f} s"
        f"{'  (' + '; '.join(what) + ')' if what else ''}{broke}"
    )


def print_run(title: str, run: Run) -> None:
    """Print one run: a line per turn and per request, then the totals."""
    costs = run["template_costs"]
    print()
    print(
        f"== {title}: {run['revision']}, {run['exposed']} exposed entities, "
        f"replies: {run['replies']} =="
    )
    print(
        f"prefix (system prompt + {run['tools']} tool schemas): {run['prefix_tokens']} "
        f"tokens; template tokens: user message {costs['user']}, per request "
        f"{costs['generation_prompt'] + costs['end_of_generation']} (generation prompt "
        f"{costs['generation_prompt']} + end of the previous generation "
        f"{costs['end_of_generation']}), tool results {costs['tool_results_1']} "
        f"(one) / {costs['tool_results_2']} (two)"
    )
    print(
        " #  step                                           req  prompt  cached"
        "  evaluated  generated  seconds  floor  eval/floor"
    )
    cap = run["cap"]
    for number, step in enumerate(run["steps"], 1):
        requests = step["requests"]
        evaluated = sum(r["prompt_n"] for r in requests)
        label = _short(_step_label(step), 46)
        if step["kind"] == "say":
            ratio = f"{evaluated / step['floor']:9.1f}x" if step["floor"] else ""
            print(
                f"{number:2d}  {label:46s} {len(requests):3d} "
                f"{sum(r['prompt_tokens'] for r in requests):7d} "
                f"{sum(r['cache_n'] for r in requests):7d} {evaluated:10d} "
                f"{sum(r['predicted_n'] for r in requests):10d} "
                f"{step['seconds']:8.1f} {step['floor']:6d} {ratio}"
            )
            for index, request in enumerate(requests, 1):
                print(_request_line(index, request, cap))
        else:
            print(
                f"{number:2d}  {label:46s} {0:3d}  (no model request;"
                f" {step['seconds']:.1f} s)"
            )
        for request in step["background"]:
            when = "DURING the turn" if request["during_turn"] else "after the reply"
            system = " ".join(request["system"].split()[:4])
            print(
                f"      background ({system}…), {when}: prompt"
                f" {request['prompt_tokens']} = cached "
                f"{request['cache_n']} + evaluated {request['prompt_n']}; generated "
                f"{request['predicted_n']}; {request['seconds']:.1f} s"
            )
    _print_totals(run)


def fast_and_model_seconds(run: Run) -> tuple[list[float], list[float]]:
    """Return the seconds of the fast turns and of the model's turns.

    A fast turn is one answered with no model request: HA's recognizer
    understood it (the fast path).
    """
    fast: list[float] = []
    model: list[float] = []
    for _, step, _first in turns(run):
        (model if step["requests"] else fast).append(step["seconds"])
    return fast, model


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if not ordered:
        return 0.0
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def _print_fast_path(run: Run) -> None:
    fast, model = fast_and_model_seconds(run)
    if not fast or not model:
        print(
            f"fast path: {len(fast)} turns without a model request, {len(model)} "
            "with one; no ratio"
        )
        return
    fast_s, model_s = _median(fast), _median(model)
    print(
        f"fast path (turns answered by HA's recognizer, no model request): "
        f"{len(fast)} turns, median {fast_s * 1000:.0f} ms "
        f"({', '.join(f'{s * 1000:.0f}' for s in fast)} ms); model turns: "
        f"{len(model)}, median {model_s:.2f} s; a fast turn takes "
        f"{fast_s / model_s:.1%} of a model turn's time "
        f"({model_s / max(fast_s, 1e-9):.0f}x faster)"
    )


def _print_totals(run: Run) -> None:
    _print_fast_path(run)
    every, steady = totals(run), totals(run, steady=True)
    for name, total in (("all turns", every), ("steady state", steady)):
        print(
            f"{name} ({total.turns} turns, {total.requests} requests): prompt "
            f"{total.prompt}, cached {total.cached} (reuse {total.reuse:.1%}), "
            f"evaluated {total.evaluated} against a floor of {total.floor} "
            f"({total.over_floor:.1f}x), generated {total.generated}, "
            f"{total.seconds:.0f} s"
        )
    setup = run.get("setup", [])
    print(
        f"after setup, before step 1 (the prefix warm-up): {len(setup)} requests,"
        f" evaluated {sum(r['prompt_n'] for r in setup)}"
    )
    background = [r for s in run["steps"] for r in s["background"]]
    warmups = [r for r in background if r.get("warmup")]
    print(
        f"warm-ups after background calls: {len(warmups)}, evaluated "
        f"{sum(r['prompt_n'] for r in warmups)}"
    )
    during = sum(r["during_turn"] for r in background)
    print(
        f"background requests (summaries, learning): {len(background)}, {during} of "
        f"them during a turn; evaluated {sum(r['prompt_n'] for r in background)}, "
        f"generated {sum(r['predicted_n'] for r in background)}"
    )
    requests = [r for s in run["steps"] for r in (*s["requests"], *s["background"])]
    capped = sum(r["capped"] and r["stop_type"] == "limit" for r in requests)
    at_cap = sum(r["stop_type"] == "limit" for r in requests)
    loops = sum(r["stop_type"] == "closed" for r in requests)
    asked = sum(not r["capped"] for r in requests)
    unused = sum(s["forced_unused"] for s in run["steps"])
    spontaneous = sum(
        len(r["tool_calls"])
        for s in run["steps"]
        for r in s["requests"]
        if not r["forced"]
    )
    again = sum(
        max(
            0,
            len(s["requests"]) - 1 - sum(bool(r["tool_calls"]) for r in s["requests"]),
        )
        for s in run["steps"]
    )
    print(
        f"output caps: {asked} of {len(requests)} requests sent num_predict; "
        f"{capped} stopped at the shim's {run['cap']}-token cap. Tool calls: "
        f"{spontaneous} written by the model itself; forced calls or replies never "
        f"asked for: {unused}; requests that asked again after an answer (an empty "
        f"one, or a tool call written as text): {again}"
    )
    print(
        f"answers that ran to their output cap: {at_cap}; stopped by the "
        f"integration as loops: {loops}"
    )


def _ratio(new: float, old: float) -> str:
    return f"{new / old:5.2f}x" if old else "    -"


def print_comparison(
    title: str, new: Run, old: Run, new_name: str, old_name: str
) -> None:
    """Print two runs of the same script side by side, with ratios."""
    print()
    print(
        f"== {title}: {new_name} ({new['revision']}) against {old_name}"
        f" ({old['revision']}) =="
    )
    print(
        " #  step                                    evaluated new / old (ratio)"
        "    reuse new / old    generated new / old   seconds new / old"
    )
    old_steps = {number: step for number, step, _ in turns(old)}
    for number, step, _ in turns(new):
        other = old_steps.get(number)
        if other is None:
            continue
        row = []
        for s in (step, other):
            requests = s["requests"]
            prompt = sum(r["prompt_tokens"] for r in requests)
            row.append(
                (
                    sum(r["prompt_n"] for r in requests),
                    sum(r["cache_n"] for r in requests) / prompt if prompt else 0.0,
                    sum(r["predicted_n"] for r in requests),
                    s["seconds"],
                )
            )
        (e1, c1, g1, s1), (e2, c2, g2, s2) = row
        print(
            f"{number:2d}  {_short(_step_label(step), 38):38s} {e1:6d} / {e2:6d} "
            f"({_ratio(e1, e2)})   {c1:6.1%} / {c2:6.1%}   {g1:6d} / {g2:6d}"
            f"      {s1:6.1f} / {s2:6.1f}"
        )
    for name, steady in (("all turns", False), ("steady state", True)):
        a, b = totals(new, steady=steady), totals(old, steady=steady)
        print(
            f"{name}: evaluated {a.evaluated} / {b.evaluated}"
            f" ({_ratio(a.evaluated, b.evaluated)}), reuse {a.reuse:.1%} /"
            f" {b.reuse:.1%}, evaluated/floor {a.over_floor:.1f}x /"
            f" {b.over_floor:.1f}x, generated {a.generated} / {b.generated}, seconds"
            f" {a.seconds:.0f} / {b.seconds:.0f} ({_ratio(a.seconds, b.seconds)})"
        )
