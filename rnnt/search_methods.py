"""Every decoding method by name, behind one signature: search(model, enc, enc_lens, name, options) ->
list[list[Hypothesis]], for each utterance of the batch its n-best, best first (one hypothesis for the
greedy searches). decode.py, transcribe.py, the Transcriber, tune_lm_fusion.py and the recipes'
--methods all take these names.

  greedy, beam, modified_beam           the transducer (rnnt.search, rnnt.modified_beam_search)
  beam_lm, modified_beam_lm             the same with an n-gram LM fused in (over the units, or over words
                                        through the lexicon; rnnt.lm.fusion)
  beam_lodr, modified_beam_lodr         the same less a low-order LM over the units (LODR)
  ctc_greedy, ctc_prefix_beam           the model's CTC head (rnnt.ctc_search)
  ctc_prefix_beam_lm                    prefix beam search with an n-gram LM
  pooled_beam_lm                        both: modified_beam_lm's and ctc_prefix_beam_lm's n-bests pooled and
                                        scored by the transducer over all alignments (rnnt.pooled_search)
The LM of an *_lm or *_lodr method and its weights are an experiment's lm/<method>.yaml, chosen on dev by
steps/tune_lm_fusion.py, with the weight of the CTC head's rescoring of a transducer's n-best
(rnnt.ctc_rescoring) where the model has one.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from typing import Callable

import torch

from rnnt.cli import at_least
from rnnt.ctc_rescoring import ctc_rescored
from rnnt.ctc_search import ctc_greedy_search, ctc_prefix_beam_search
from rnnt.lm.fusion import Fusion, LowOrderSubtraction, read_fusion_config
from rnnt.lm.hotwords import HotwordFusion, HotwordGraph
from rnnt.prep.download import changed_since
from rnnt.modified_beam_search import modified_beam_search
from rnnt.modified_beam_search_lm import modified_beam_search_lm
from rnnt.pooled_search import pooled_beam_search_lm
from rnnt.search import Hypothesis, beam_search, greedy_search


@dataclass(frozen=True)
class SearchOptions:
    beam: int = 4
    max_symbols_per_frame: int | None = None  # greedy and beam search (rnnt.search.symbols_per_frame)
    fusion: Fusion | None = None  # the LM of an *_lm or *_lodr method
    ctc_weight: float = 0.0  # transducer searches: the CTC head's rescoring of the n-best (rnnt.ctc_rescoring)
    # pooled_beam_lm: each pooled hypothesis's transducer log-likelihood by (row of the batch, labels), kept
    # across searches of one encoded batch (steps/tune_lm_fusion.py's grid: one dict a batch), else None
    likelihoods: dict | None = field(default=None, compare=False)


Search = Callable[[object, torch.Tensor, torch.Tensor, SearchOptions], list[list[Hypothesis]]]


@dataclass(frozen=True)
class Method:
    search: Search
    head: str  # what it searches: "transducer" or "ctc"
    lm: str = ""  # "": no LM; "lm": an LM fused in; "lodr": an LM fused in less a low-order LM
    without_lm: str = ""  # an LM method's search without its LM (the baseline steps/tune_lm_fusion.py reports)
    needs_ctc: bool = False  # a transducer search that also searches the CTC head
    linear: bool = False  # its time in proportion to the frames (else to frames x labels, docs/decoding.md)
    fuses: bool = True  # it takes a Fusion: an LM's, hotwords' (the greedy searches do not), and a beam
    caps_symbols: bool = False  # it takes max_symbols_per_frame (a modified beam emits one at most by its design)


def _each_utterance(search) -> Search:
    """A search of one utterance's encoder output (T, D) and length as a search of the batch."""
    return lambda model, enc, enc_lens, options: [search(model, enc[b], int(enc_lens[b]), options)
                                                  for b in range(enc.shape[0])]


def _greedy(model, enc, enc_lens, options):
    return [[hyp] for hyp in greedy_search(model, enc, enc_lens, options.max_symbols_per_frame)]


def _beam(model, enc, enc_len, options):
    return beam_search(model, enc, enc_len, options.beam, options.max_symbols_per_frame, options.fusion)


def _modified_beam(model, enc, enc_lens, options):
    if options.fusion is not None:
        return modified_beam_search_lm(model, enc, enc_lens, options.beam, options.fusion)
    return modified_beam_search(model, enc, enc_lens, options.beam)


def _pooled_beam(model, enc, enc_lens, options):
    return pooled_beam_search_lm(model, enc, enc_lens, options.beam, options.fusion, options.likelihoods)


def _ctc_greedy(model, enc, enc_lens, options):
    return [[hyp] for hyp in ctc_greedy_search(model, enc, enc_lens)]


def _ctc_prefix_beam(model, enc, enc_len, options):
    return ctc_prefix_beam_search(model, enc, enc_len, options.beam, options.fusion)


METHODS: dict[str, Method] = {
    "greedy": Method(_greedy, "transducer", linear=True, fuses=False, caps_symbols=True),
    "beam": Method(_each_utterance(_beam), "transducer", linear=True, caps_symbols=True),
    "beam_lm": Method(_each_utterance(_beam), "transducer", "lm", "beam", linear=True, caps_symbols=True),
    "beam_lodr": Method(_each_utterance(_beam), "transducer", "lodr", "beam", linear=True, caps_symbols=True),
    "modified_beam": Method(_modified_beam, "transducer", linear=True),
    "modified_beam_lm": Method(_modified_beam, "transducer", "lm", "modified_beam", linear=True),
    "modified_beam_lodr": Method(_modified_beam, "transducer", "lodr", "modified_beam", linear=True),
    "pooled_beam_lm": Method(_pooled_beam, "transducer", "lm", "modified_beam", needs_ctc=True),
    "ctc_greedy": Method(_ctc_greedy, "ctc", linear=True, fuses=False),
    "ctc_prefix_beam": Method(_each_utterance(_ctc_prefix_beam), "ctc", linear=True),
    "ctc_prefix_beam_lm": Method(_each_utterance(_ctc_prefix_beam), "ctc", "lm", "ctc_prefix_beam", linear=True),
}
LM_METHODS = tuple(name for name, method in METHODS.items() if method.lm)


def head_problem(name: str, has_ctc: bool, is_transducer: bool) -> str | None:
    """Why a model with these heads cannot decode with the method of that name (None: it can)."""
    method = METHODS.get(name)
    if method is None:
        return f"decoding method must be one of {tuple(METHODS)}, got '{name}'"
    if (method.head == "ctc" or method.needs_ctc) and not has_ctc:
        return f"--method {name} needs a CTC head; this model has none (train with loss.ctc_weight > 0)"
    if method.head == "transducer" and not is_transducer:
        return (f"--method {name} searches a transducer; this is a CTC model: use ctc_greedy, ctc_prefix_beam or "
                "ctc_prefix_beam_lm")
    return None


def check_method(model, name: str, options: SearchOptions | None = None) -> Method:
    """The method of that name if the model can run it (with options' LM, where given), else ValueError
    saying why not."""
    if problem := head_problem(name, model.ctc is not None, model.is_transducer):
        raise ValueError(problem)
    method = METHODS[name]
    if options is not None:
        check_fusion(name, options.fusion)
        if options.ctc_weight and (method.head != "transducer" or model.ctc is None):
            raise ValueError(f"--method {name}: CTC rescoring (ctc_weight {options.ctc_weight}) is of a transducer's "
                             "n-best by the model's CTC head" + ("" if model.ctc is not None else "; it has none"))
    return method


def check_fusion(name: str, fusion: Fusion | None) -> None:
    """An *_lm method needs an LM, an *_lodr method an LM with a low-order LM subtracted; the others none;
    hotwords (over an LM or alone) go with a method that takes a Fusion."""
    if isinstance(fusion, HotwordFusion):
        if problem := hotwords_problem(name):
            raise ValueError(problem)
        fusion = fusion.inner
    lm = METHODS[name].lm
    if lm and fusion is None:
        raise ValueError(f"{name} needs an LM: an lm/{name}.yaml (steps/tune_lm_fusion.py writes one)")
    if not lm and fusion is not None:
        raise ValueError(f"{name} searches without an LM; its LM-fused method is {name}_lm")
    if fusion is not None and (lm == "lodr") != isinstance(fusion, LowOrderSubtraction):
        raise ValueError(f"{name}: its LM {'lacks' if lm == 'lodr' else 'has'} a low-order LM subtracted "
                         f"(steps/tune_lm_fusion.py --lodr-arpa writes one for the *_lodr methods)")


def search(model, enc: torch.Tensor, enc_lens: torch.Tensor, name: str,
           options: SearchOptions = SearchOptions()) -> list[list[Hypothesis]]:
    """Each utterance's n-best by the method `name`, from the encoder output enc (B, T, D)."""
    with torch.no_grad():
        nbests = check_method(model, name, options).search(model, enc, enc_lens, options)
    return ctc_rescored(model, enc, enc_lens, nbests, options.ctc_weight)


def lm_options(name: str, tokenizer, config_path: str, beam: int | None = None,
               max_symbols_per_frame: int | None = None, checkpoint: str | None = None) -> SearchOptions:
    """The options of an LM-fused method from its yaml (rnnt.lm.fusion.write_fusion_config): its LM, the
    CTC rescoring weight, and the beam its weights were chosen with unless `beam` is given. Weights chosen with
    another checkpoint than the one decoding (a training resumed, the average made again) are warned of."""
    config = read_fusion_config(config_path)
    if checkpoint and changed_since(checkpoint, config.checkpoint_sha256):
        print(f"{os.path.basename(sys.argv[0])}: warning: {config_path}: its weights were chosen with another "
              f"checkpoint than {checkpoint} ({config.chosen_on} as it was then): choose them again "
              "(steps/tune_lm_fusion.py, as a recipe's LM stage does)", file=sys.stderr)
    fusion = config.load(tokenizer)
    check_fusion(name, fusion)
    return SearchOptions(beam or config.beam, max_symbols_per_frame, fusion, config.ctc_weight)


def main(argv: list[str] | None = None) -> int:
    """python3 -m rnnt.search_methods CONFIG METHOD...: exit 1, naming each, where a model of the config could not
    decode with a method (a misspelt name; a CTC search of a model without a CTC head): a recipe asks before it
    trains, not at its decode stage after the training."""
    import sys

    from rnnt.cli import module_usage
    from rnnt.training.experiment import load_experiment

    argv = argv if argv is not None else sys.argv[1:]
    if (status := module_usage(argv, main.__doc__, bool(argv) and not argv[0].startswith("-"))) is not None:
        return status
    config, *names = argv
    try:
        loss = load_experiment(config).model.loss
    except (OSError, ValueError) as error:  # a --train-config misspelt: said before any stage, not at the training
        print(f"run.sh: cannot read the model config {config} (--train-config or the like): {error}", file=sys.stderr)
        return 1
    problems = [problem for name in names
                if (problem := head_problem(name, loss.has_ctc_head, loss.type != "ctc"))]
    if not names:  # run.sh --methods "": it trained, then its decode stage had no method to run
        problems.append("no decoding method given (--methods is empty)")
    for problem in problems:
        print(f"search_methods: {problem} (a model of {config})", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())


def add_lm_fusion_option(parser) -> None:
    """--lm-fusion and --hotwords, of the tools that decode with a method (decode.py, transcribe.py);
    check_search_options after parsing."""
    parser.add_argument("--lm-fusion", help="an LM-fused method (*_lm, *_lodr): the LM and its weights (default: "
                        "<exp-dir>/lm/<method>.yaml, written by steps/tune_lm_fusion.py)")
    parser.add_argument("--hotwords", help="a file of phrases to favour, one a line, optionally its own score after "
                        "it ('NEW YORK :3'; contextual biasing, as sherpa-onnx's --hotwords-file): a beam search's "
                        "units of them get that score or --hotwords-score each")
    parser.add_argument("--hotwords-score", type=at_least(0.0), default=1.5,
                        help="added for each unit of a hotword without its own score as it is matched, taken back "
                             "where the match breaks (default 1.5, sherpa-onnx's)")


def hotwords_problem(name: str, option: str = "--hotwords") -> str | None:
    """Why the method of that name cannot favour hotwords, or take another option of a beam search (None: it can)."""
    if not METHODS[name].fuses:
        return (f"{option} goes with a beam search (modified_beam, beam, ctc_prefix_beam or an LM-fused one), "
                f"not {name}")
    return None


def with_hotwords(options: SearchOptions, graph: HotwordGraph | None) -> SearchOptions:
    """options with the hotwords over their fusion (None: options as they are)."""
    return options if graph is None else replace(options, fusion=HotwordFusion(graph, options.fusion))


def check_search_options(parser, args) -> None:
    """The options given go with args.method (one that does not was ignored: its results named as of a search
    that did not run)."""
    if args.lm_fusion and not METHODS[args.method].lm:
        parser.error(f"--lm-fusion goes with an LM-fused method (*_lm, *_lodr), not {args.method}")
    if args.hotwords and (problem := hotwords_problem(args.method)):
        parser.error(problem)
    if args.beam is not None and (problem := hotwords_problem(args.method, "--beam")):
        parser.error(problem)
    if getattr(args, "max_symbols_per_frame", None) is not None and not METHODS[args.method].caps_symbols:
        emits = "CTC emits" if METHODS[args.method].head == "ctc" else "a modified beam emits"
        capping = [name for name, method in METHODS.items() if method.caps_symbols]
        parser.error(f"--max-symbols-per-frame goes with {', '.join(capping[:-1])} and {capping[-1]}, not "
                     f"{args.method} ({emits} one a frame at most)")
