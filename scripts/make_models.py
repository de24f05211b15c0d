#!/usr/bin/env python3
"""Make small, deterministic, random-weight GGUF models for testing against llama.cpp.

Writes into --out:

  tiny.gguf              Qwen2 architecture: hidden 64, 2 layers, 4 heads / 2 KV heads, FFN 256,
                         vocab 2048, context 32768; f32 weights drawn from a fixed seed.
  draft.gguf             same tokenizer and vocabulary, 1 layer, another seed: a speculative
                         decoding draft for tiny.gguf.
  tokenizer.json         the byte-level BPE tokenizer both models embed (Hugging Face format),
  tokenizer_config.json  with the chat template, so the folder also works as a tokenizer directory.
  SHA256SUMS             sha256 of every file above (`sha256sum -c` format).

The files are byte-identical on every run and every machine with the same pinned packages
(gguf==0.19.0, numpy, tokenizers; see scripts/llama-server.sh): the tokenizer's training text is
generated here from a fixed seed with a self-contained generator (English-like prose from an
embedded word list, JSON objects, code-like lines, numbers), never read from the local system.

The weights are random, so the text the models generate is meaningless; they exist to exercise a
real serving engine: tokenization, chat templates (ChatML with Hermes-style <tool_call> tools),
streaming, grammar-constrained output, slots, prompt caching and speculative decoding.

Usage: make_models.py --out DIR
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

import gguf

VOCAB_SIZE = 2048
CONTEXT_LENGTH = 32768

# id order after training: learned BPE vocabulary first, then these (as in Qwen2 tokenizers)
CONTROL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
USER_TOKENS = ["<tool_call>", "</tool_call>", "<think>", "</think>"]

# Qwen2's pre-tokenizer split (llama.cpp applies the same split for tokenizer.ggml.pre "qwen2")
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

MODELS = {
    # name: (seed, hidden, layers, heads, kv_heads, ffn)
    "tiny": (1, 64, 2, 4, 2, 256),
    "draft": (2, 64, 1, 4, 2, 256),
}
WEIGHT_STD = 0.02
CORPUS_SEED = 20240601

# Qwen2.5-style ChatML template with Hermes <tool_call> tools.
CHAT_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

# ----------------------------------------------------------------------------------------------
# Training text

DETERMINERS = "the a an this that these those every each some any no my your our their his her its".split()
PRONOUNS = "I you we they he she it someone everyone nobody".split()
NOUNS = """
time year people way day man woman child world life hand part place case week company system
program question work government number night point home water room mother area money story fact
month lot right study book eye job word business issue side kind head house service friend father
power hour game line end member law car city community name president team minute idea kid body
information back parent face others level office door health person art war history party result
change morning reason research girl guy moment air teacher force education foot boy age policy
process music market sense nation plan college interest death experience effect use class control
care field development role effort rate heart drug show leader light voice wife police mind price
report decision son view relationship town road arm difference value building action model season
society tax director position player record paper space ground form event official matter center
couple site project activity star table need court oil situation cost industry figure street image
phone data picture practice piece land product doctor wall patient worker news test movie north love
support technology step baby computer type attention film tree source organization hair window
evidence population truth song network server request token stream client queue cache latency
throughput benchmark engine model prompt response message function argument value key file folder
report metric sample window batch thread signal error warning result chart table column row record
""".split()
VERBS = """
be have do say get make go know take see come think look want give use find tell ask work seem
feel try leave call keep let begin help show hear play run move live believe hold bring happen
write provide sit stand lose pay meet include continue set learn change lead understand watch follow
stop create speak read allow add spend grow open walk win offer remember love consider appear buy
wait serve die send expect build stay fall cut reach kill remain suggest raise pass sell require
report decide pull measure record compare start finish stream parse count render load return
""".split()
ADJECTIVES = """
other new good high old great big small large national young different black long little important
political bad white real best right social only public sure low early able human local late hard
major better economic strong possible whole free military true federal international full special
easy clear recent certain personal open red difficult available likely short single medical current
wrong private past foreign fine common poor natural significant similar hot dead central happy
serious ready simple left physical general environmental financial blue democratic dark various
entire close legal religious cold final main green nice huge popular traditional cultural fast slow
quiet bright heavy warm careful random steady
""".split()
ADVERBS = """
up so out just now how then also very well only even back there down still in as too when never
really most here always often again however almost later far together already quickly slowly
probably perhaps finally usually suddenly actually rather certainly clearly simply nearly
""".split()
PREPOSITIONS = "of in to for with on at from by about into over after under between through during without before around among".split()
CONJUNCTIONS = "and but or because although while since unless so yet".split()
NAMES = "Alice Bob Carol David Emma Frank Grace Henry Irene Jack Karen Liam Maria Noah Olivia Peter Quinn Rosa Sam Tina".split()
PLACES = "London Paris Berlin Tokyo Madrid Lisbon Oslo Dublin Vienna Prague Cairo Lima Seoul Sydney Toronto Chicago Boston Denver".split()
KEYS = """
id name type value status count total price items user email created updated enabled tags model
role content message tokens latency score index label text url path size version level ok error
""".split()
IDENTIFIERS = """
request response client server config buffer reader writer stream token count total index result
value item items data input output state context handler parser decoder encoder metrics timer
""".split()


class Rng:
    """splitmix64: a tiny generator with a fixed, version-independent output sequence."""

    def __init__(self, seed: int) -> None:
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        return self.next() % n

    def chance(self, percent: int) -> bool:
        return self.below(100) < percent

    def pick(self, items: list[str]) -> str:
        # skewed towards the front of each list, so frequent words become whole tokens
        a, b = self.below(len(items)), self.below(len(items))
        return items[min(a, b)] if self.chance(60) else items[a]


def noun_phrase(r: Rng) -> str:
    if r.chance(15):
        return r.pick(NAMES)
    words = [r.pick(DETERMINERS)]
    if words[0] == "a" or words[0] == "an":
        words = []
        adjective = r.pick(ADJECTIVES) if r.chance(40) else ""
        noun = r.pick(NOUNS)
        first = adjective or noun
        words.append("an" if first[0] in "aeiou" else "a")
        if adjective:
            words.append(adjective)
        words.append(noun)
        return " ".join(words)
    if r.chance(40):
        words.append(r.pick(ADJECTIVES))
    noun = r.pick(NOUNS)
    if words[0] in ("these", "those", "some", "their", "our") and r.chance(70):
        noun = noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")
    words.append(noun)
    return " ".join(words)


def verb_form(r: Rng, verb: str) -> str:
    form = r.below(4)
    if form == 0:
        return verb
    if form == 1:
        return verb + ("es" if verb.endswith(("s", "x", "ch", "sh", "o")) else "s")
    if form == 2:
        return verb[:-1] + "ed" if verb.endswith("e") else verb + "ed"
    return "will " + verb


def clause(r: Rng) -> str:
    subject = r.pick(PRONOUNS) if r.chance(30) else noun_phrase(r)
    parts = [subject]
    if r.chance(20):
        parts.append(r.pick(ADVERBS))
    parts.append(verb_form(r, r.pick(VERBS)))
    parts.append(noun_phrase(r))
    if r.chance(50):
        parts.append(r.pick(PREPOSITIONS))
        parts.append(r.pick(PLACES) if r.chance(20) else noun_phrase(r))
    if r.chance(15):
        parts.append(r.pick(ADVERBS))
    return " ".join(parts)


def sentence(r: Rng) -> str:
    text = clause(r)
    if r.chance(35):
        text += ("," if r.chance(50) else "") + " " + r.pick(CONJUNCTIONS) + " " + clause(r)
    if r.chance(10):
        text += f" in {1900 + r.below(130)}"
    if r.chance(8):
        text += f", about {r.below(1000)} {r.pick(NOUNS)}s"
    end = "." if r.chance(80) else ("?" if r.chance(60) else "!")
    text = text[0].upper() + text[1:] + end
    if r.chance(5):
        text = f'"{text}" said {r.pick(NAMES)}.'
    return text


def paragraph(r: Rng) -> str:
    return " ".join(sentence(r) for _ in range(2 + r.below(6)))


def json_value(r: Rng, depth: int) -> object:
    kind = r.below(7 if depth < 2 else 5)
    if kind == 0:
        return r.below(100000)
    if kind == 1:
        return round(r.below(1000000) / 1000, 3)
    if kind == 2:
        return r.chance(50)
    if kind == 3:
        return " ".join(r.pick(NOUNS) for _ in range(1 + r.below(3)))
    if kind == 4:
        return sentence(r) if r.chance(40) else r.pick(NAMES)
    if kind == 5:
        return [json_value(r, depth + 1) for _ in range(1 + r.below(4))]
    return json_object(r, depth + 1)


def json_object(r: Rng, depth: int = 0) -> dict[str, object]:
    obj: dict[str, object] = {}
    for _ in range(1 + r.below(6)):
        obj[r.pick(KEYS)] = json_value(r, depth)
    return obj


def json_text(r: Rng) -> str:
    obj = json_object(r)
    if r.chance(30):
        return json.dumps(obj, indent=2, ensure_ascii=True)
    if r.chance(20):
        return json.dumps({"name": r.pick(IDENTIFIERS), "arguments": obj}, ensure_ascii=True)
    return json.dumps(obj, ensure_ascii=True)


def code_text(r: Rng) -> str:
    lines = []
    a, b, c = r.pick(IDENTIFIERS), r.pick(IDENTIFIERS), r.pick(IDENTIFIERS)
    style = r.below(3)
    if style == 0:
        lines.append(f"def {a}_{b}({c}, {r.pick(IDENTIFIERS)}=None):")
        lines.append(f"    {a} = {c}.get(\"{r.pick(KEYS)}\", {r.below(100)})")
        lines.append(f"    if {a} > {r.below(1000)}:")
        lines.append(f"        return {b}[{r.below(10)}]")
        lines.append(f"    for {c} in {b}:")
        lines.append(f"        {a} += len({c})")
        lines.append(f"    return {a}")
    elif style == 1:
        lines.append(f"fn {a}_{b}({c}: &str, {r.pick(IDENTIFIERS)}: usize) -> Result<u64, Error> {{")
        lines.append(f"    let {a} = {c}.parse::<u64>()?;")
        lines.append(f"    if {a} > {r.below(1000)} {{")
        lines.append(f"        return Ok({a} * {r.below(64)});")
        lines.append("    }")
        lines.append(f"    Ok({a} + {b}.len() as u64)")
        lines.append("}")
    else:
        lines.append(f"const {a} = await fetch(`/v1/{b}s/${{{c}}}`);")
        lines.append(f"if (!{a}.ok) {{ throw new Error(\"{r.pick(KEYS)} failed: \" + {a}.status); }}")
        lines.append(f"const {b} = JSON.parse(await {a}.text());")
        lines.append(f"console.log({b}.{r.pick(KEYS)}, {r.below(100)});")
    return "\n".join(lines)


def numbers_text(r: Rng) -> str:
    rows = []
    for _ in range(1 + r.below(4)):
        date = f"{2000 + r.below(30)}-{1 + r.below(12):02d}-{1 + r.below(28):02d}"
        rows.append(f"{date} {r.pick(NOUNS)} {r.below(100000)} {r.below(1000)}.{r.below(100):02d} {r.below(100)}%")
    return "\n".join(rows)


def corpus(seed: int, n_docs: int = 40000):
    r = Rng(seed)
    for _ in range(n_docs):
        kind = r.below(10)
        if kind < 6:
            yield paragraph(r)
        elif kind < 8:
            yield json_text(r)
        elif kind < 9:
            yield code_text(r)
        else:
            yield numbers_text(r)


# ----------------------------------------------------------------------------------------------
# Tokenizer

def train_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    n_learned = VOCAB_SIZE - len(CONTROL_TOKENS) - len(USER_TOKENS)
    trainer = trainers.BpeTrainer(
        vocab_size=n_learned,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(corpus(CORPUS_SEED), trainer=trainer)
    if tok.get_vocab_size() != n_learned:
        raise SystemExit(f"tokenizer training produced {tok.get_vocab_size()} tokens, expected {n_learned}")
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in CONTROL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in USER_TOKENS])
    if tok.get_vocab_size() != VOCAB_SIZE:
        raise SystemExit(f"tokenizer has {tok.get_vocab_size()} tokens, expected {VOCAB_SIZE}")
    return tok


def tokenizer_tables(tok: Tokenizer) -> tuple[list[str], list[int], list[str]]:
    data = json.loads(tok.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    for added in data["added_tokens"]:
        vocab[added["content"]] = added["id"]
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    if [i for _, i in by_id] != list(range(VOCAB_SIZE)):
        raise SystemExit("tokenizer ids are not contiguous")
    tokens = [t for t, _ in by_id]
    types = []
    for t in tokens:
        if t in CONTROL_TOKENS:
            types.append(int(gguf.TokenType.CONTROL))
        elif t in USER_TOKENS:
            types.append(int(gguf.TokenType.USER_DEFINED))
        else:
            types.append(int(gguf.TokenType.NORMAL))
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return tokens, types, merges


# ----------------------------------------------------------------------------------------------
# Models

def write_model(path: str, name: str, tok: Tokenizer, tables, spec) -> None:
    seed, hidden, layers, heads, kv_heads, ffn = spec
    tokens, types, merges = tables
    head_dim = hidden // heads
    kv_dim = kv_heads * head_dim
    rng = np.random.default_rng(seed)

    def matrix(rows: int, cols: int) -> np.ndarray:
        # numpy layout (out_features, in_features), as in a torch Linear weight
        return (rng.standard_normal((rows, cols)) * WEIGHT_STD).astype(np.float32)

    def vector(n: int) -> np.ndarray:
        return (rng.standard_normal(n) * WEIGHT_STD).astype(np.float32)

    w = gguf.GGUFWriter(path, "qwen2")
    w.add_name(f"anvil-{name}")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(CONTEXT_LENGTH)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    vocab = tok.get_vocab()
    w.add_bos_token_id(vocab["<|endoftext|>"])
    w.add_eos_token_id(vocab["<|im_end|>"])
    w.add_pad_token_id(vocab["<|endoftext|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    w.add_tensor("token_embd.weight", matrix(VOCAB_SIZE, hidden))
    for i in range(layers):
        p = f"blk.{i}"
        w.add_tensor(f"{p}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
        w.add_tensor(f"{p}.attn_q.weight", matrix(hidden, hidden))
        w.add_tensor(f"{p}.attn_q.bias", vector(hidden))
        w.add_tensor(f"{p}.attn_k.weight", matrix(kv_dim, hidden))
        w.add_tensor(f"{p}.attn_k.bias", vector(kv_dim))
        w.add_tensor(f"{p}.attn_v.weight", matrix(kv_dim, hidden))
        w.add_tensor(f"{p}.attn_v.bias", vector(kv_dim))
        w.add_tensor(f"{p}.attn_output.weight", matrix(hidden, hidden))
        w.add_tensor(f"{p}.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        w.add_tensor(f"{p}.ffn_gate.weight", matrix(ffn, hidden))
        w.add_tensor(f"{p}.ffn_up.weight", matrix(ffn, hidden))
        w.add_tensor(f"{p}.ffn_down.weight", matrix(hidden, ffn))
    w.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    w.add_tensor("output.weight", matrix(VOCAB_SIZE, hidden))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tokenizer_config() -> dict[str, object]:
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": CONTEXT_LENGTH,
        "pad_token": "<|endoftext|>",
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    tok = train_tokenizer()
    tables = tokenizer_tables(tok)
    written = []

    path = os.path.join(args.out, "tokenizer.json")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(tok.to_str(pretty=True))
        f.write("\n")
    written.append(path)

    path = os.path.join(args.out, "tokenizer_config.json")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(tokenizer_config(), f, indent=2, sort_keys=True)
        f.write("\n")
    written.append(path)

    for name, spec in MODELS.items():
        path = os.path.join(args.out, f"{name}.gguf")
        write_model(path, name, tok, tables, spec)
        written.append(path)

    sums = [(sha256(p), os.path.basename(p)) for p in written]
    with open(os.path.join(args.out, "SHA256SUMS"), "w", encoding="utf-8", newline="\n") as f:
        for digest, base in sums:
            f.write(f"{digest}  {base}\n")
    for (digest, base), p in zip(sums, written):
        print(f"{digest}  {base}  ({os.path.getsize(p)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
