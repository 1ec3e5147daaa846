"""``python -m flowtrain sample RUN --prompt-ids 1,2,3 --tokens N``: text from a finished language model.

The run's ``model.onnx`` on onnxruntime (the default), or ``--framework`` the run's own framework with
its saved model in the run's interpreter (the model worker, :func:`core.trained.generate_trained`),
runs :mod:`core.sampling`'s loop: greedy at ``--temperature 0`` (the default), else sampled with
``--seed``, so the same command gives the same ids in every engine. A run found and checked as
``predict`` finds it (:func:`cli.predict.named_run`, :func:`cli.predict.engine_of`).
"""

from __future__ import annotations

import argparse
import json
import math
import secrets

from cli.common import ADMIN_HELP
from cli.predict import ENGINES, engine_of, named_run, onnx_model_of
from cli.terminal import terminal_text
from core.errors import CommandError, Problem
from core.prediction import onnx_function
from core.sampling import Request, generate
from core.token_stream import BYTE_VOCAB, kind
from schedulers.registry.files import ONNX_NAME
from schedulers.registry.records import Run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("sample", help="generate tokens from a finished language-model run (greedy or sampled)")
    p.add_argument("run", metavar="RUN", help="a completed language-model run's id or name")
    prompt = p.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt-ids", default=None, help="the prompt's token ids, comma-separated: 72,101,108")
    prompt.add_argument("--text", default=None,
                        help="the prompt as text, for a run that reads its text byte by byte (its ids are the UTF-8 bytes)")
    p.add_argument("--tokens", type=int, required=True, help="how many tokens to generate")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="0 (the default): always the most likely token; above 0: sampled from softmax(scores / T)")
    p.add_argument("--top-k", type=int, default=None, help="sample among the K most likely tokens only")
    p.add_argument("--seed", type=int, default=None,
                   help="the sampling's seed (default: a fresh one, printed, so the output can be repeated)")
    p.add_argument("--framework", choices=ENGINES, default="onnx",
                   help="the engine: onnx (model.onnx on onnxruntime, the default) or the run's own framework")
    p.add_argument("--json", action="store_true", help="one JSON object: the prompt, the new ids (and text)")
    p.add_argument("--user", default=None, help=ADMIN_HELP)
    p.set_defaults(handler=cmd_sample)


def cmd_sample(args: argparse.Namespace) -> int:
    problems = _argument_problems(args)
    run = named_run(args)
    try:
        engine = engine_of(run, args.framework)
    except CommandError as exc:
        said = str(exc)  # "--framework F: …" when the run was trained with another framework
        location, message = said.split(": ", 1) if said.startswith("--framework") else ("RUN", said)
        problems.append(Problem(location, message))
        engine = args.framework
    spec = run.spec()
    data = spec.data
    if data.task != "language_modeling":
        problems.append(Problem("RUN", f"run {run.id} ({run.name}) is not a language model",
                                received=f"data.task {data.task}", expected="data.task language_modeling",
                                fix=f"sample from a language-model run; `python -m flowtrain predict {run.id} INPUT…` "
                                    "asks this one"))
        raise _refused(problems)
    byte_level = kind(data.source) == "bytes" and data.vocab_size == BYTE_VOCAB
    prompt = _prompt(args, data.vocab_size, byte_level, problems)
    if problems:
        raise _refused(problems)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    request = Request(prompt=prompt, tokens=args.tokens, block_size=int(data.block_size), temperature=args.temperature,
                      top_k=args.top_k, seed=seed)
    ids, through = _generate(run, engine, request)
    _show(run, request, ids, through, byte_level, args)
    return 0


def _argument_problems(args: argparse.Namespace) -> list[Problem]:
    problems = []
    if args.tokens < 1:
        problems.append(Problem("--tokens", "nothing to generate", received=str(args.tokens),
                                expected="a whole number of at least 1", fix="ask for one token or more: --tokens 50"))
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        problems.append(Problem("--temperature", "not a temperature", received=str(args.temperature),
                                expected="0 (greedy) or a positive number", fix="--temperature 0.8"))
    if args.top_k is not None and args.top_k < 1:
        problems.append(Problem("--top-k", "no token to sample from", received=str(args.top_k),
                                expected="a whole number of at least 1", fix="--top-k 40, or leave it out"))
    return problems


def _prompt(args: argparse.Namespace, vocab_size: int, byte_level: bool, problems: list[Problem]) -> list[int]:
    """The prompt's ids from ``--text`` or ``--prompt-ids``; what is wrong with them goes to ``problems``."""
    if args.text is not None:
        if not byte_level:
            problems.append(Problem("--text", "this run's tokens are not the bytes of a text",
                                    received="a text prompt", expected="token ids",
                                    fix="give the prompt's token ids with --prompt-ids 1,2,3"))
            return []
        ids = list(args.text.encode("utf-8"))
        if not ids:
            problems.append(Problem("--text", "an empty prompt", received='""', expected="at least one character",
                                    fix='--text "Once upon a time"'))
        return ids
    texts = [t.strip() for t in args.prompt_ids.split(",")]
    bad = [t for t in texts if not t.lstrip("-").isdigit()]
    if bad:
        problems.append(Problem("--prompt-ids", "not a comma-separated list of token ids",
                                received=", ".join(repr(t) for t in bad[:5]), expected="whole numbers: 72,101,108",
                                fix="separate the ids with commas, no other characters"))
        return []
    ids = [int(t) for t in texts]
    outside = [i for i in ids if not 0 <= i < vocab_size]
    if outside:
        problems.append(Problem("--prompt-ids", "token ids outside the run's vocabulary",
                                received=", ".join(map(str, outside[:10])) + (" …" if len(outside) > 10 else ""),
                                expected=f"ids 0 … {vocab_size - 1} (data.vocab_size {vocab_size})",
                                fix="give ids of the vocabulary the run was trained on"))
    return ids


def _refused(problems: list[Problem]) -> CommandError:
    return CommandError("\n".join([f"{len(problems)} problem(s) with this sample command:",
                                   *(f"  - {p}" for p in problems)]))


def _generate(run: Run, engine: str, request: Request) -> tuple[list[int], str]:
    """The new ids and what gave them. With the run's framework the ids are compared with
    ``model.onnx``'s for the same request where the run has one."""
    if engine == "onnx":
        return generate(onnx_function(onnx_model_of(run)), request), ONNX_NAME
    from core.trained import SAVED_MODEL, TrainedModelError, generate_trained
    from schedulers.model_export import checked_python

    try:
        ids = generate_trained(run.run_dir, request, python=checked_python(run))
    except TrainedModelError as exc:
        raise CommandError(f"run {run.id} ({run.name}): {exc}", exit_code=1) from None
    through = f"{engine}'s {SAVED_MODEL[engine]}"
    if (run.run_dir / ONNX_NAME).is_file():
        onnx = generate(onnx_function(run.run_dir / ONNX_NAME), request)
        first = next((i for i, (a, b) in enumerate(zip(ids, onnx, strict=True)) if a != b), None)
        through += (f" ({ONNX_NAME} gives the same {len(ids)} token(s))" if first is None else
                    f" ({ONNX_NAME} gives another token from token {first + 1} on: {onnx[first]}, not {ids[first]})")
    return ids, through


def _show(run: Run, request: Request, ids: list[int], through: str, byte_level: bool, args: argparse.Namespace) -> None:
    how = "greedy" if request.temperature == 0 else (
        f"sampled at temperature {request.temperature:g}"
        + (f" among the top {request.top_k}" if request.top_k is not None else "") + f", seed {request.seed}")
    text = bytes(request.prompt + ids).decode("utf-8", errors="replace") if byte_level else None
    if args.json:
        doc = {"run": run.id, "engine": args.framework, "through": through, "prompt": request.prompt, "ids": ids,
               "temperature": request.temperature, "top_k": request.top_k, "seed": request.seed}
        if text is not None:
            doc["text"] = text
        print(json.dumps(doc))
        return
    cropped = (f"; the context is cropped to its last {request.block_size} tokens"
               if len(request.prompt) + len(ids) - 1 > request.block_size else "")
    print(f"run {run.id} ({run.name}): {len(ids)} token(s) after a prompt of {len(request.prompt)}, {how}, "
          f"through {through}{cropped}")
    print("prompt ids: " + " ".join(map(str, request.prompt)))
    print("new ids:    " + " ".join(map(str, ids)))
    if text is not None:
        print("text:       " + terminal_text(text))
