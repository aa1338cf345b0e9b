"""scripts/prepare_text_data.py: the shards and data.json it writes.

    test_prepare_text_data.py PATH/TO/prepare_text_data.py

1. A trained byte-level BPE on generated documents: llm.c uint16 shards
   (magic 20240520, version 1, the header's count = the file's), data.json as
   the contract says, the ids of <|endoftext|> and <|pad|>, the stream =
   eos + document for each document, decoding it gives the text back byte
   for byte, the val shard is the last --val-fraction of the stream, and
   --shard-tokens splits the train stream into several files. The documents
   come shuffled by default (every one once, not in input order, the same
   order again for the same --seed, another for another seed) and in input
   order with --no-shuffle.
2. A given tokenizer.json of 70000 entries: uint32 shards (magic 20240801,
   version 7), its own <s> / </s> around each document.
3. Bad input stops with a message naming the problem.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_check  # noqa: E402


def prepare(script, *args, expect_ok=True):
    p = subprocess.run([sys.executable, script, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    print(p.stdout + p.stderr, end="")
    if expect_ok and p.returncode != 0:
        hf_check.fail(f"prepare_text_data {' '.join(args)} exited {p.returncode}")
    return p


def header(path):
    return [int(v) for v in np.fromfile(path, dtype="<i4", count=3)]


def documents(rng, count):
    words = ["subnetwork", "data", "parallel", "rank", "gradient", "owner", "block", "café",
             "naïve", "ünïcode", "tokens", "the", "of", "a", "\u2014", "model", "42", "3.14"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(40, 120))) + "\n"
            for _ in range(count)]


def check_trained(script, work):
    rng = random.Random(7)
    docs = documents(rng, 6)
    paths = []
    for i, d in enumerate(docs):
        paths.append(os.path.join(work, f"doc{i}.txt"))
        with open(paths[-1], "w", encoding="utf-8") as f:
            f.write(d)
    orders = {}
    for run, flags in [("plain", ["--no-shuffle"]), ("default", []), ("again", []),
                       ("seed", ["--seed", "99"])]:
        out = os.path.join(work, f"bpe-{run}")
        prepare(script, "--out", out, "--vocab-size", "400", "--val-fraction", "0.1",
                "--shard-tokens", "200", *flags, *paths)
        orders[run] = check_trained_output(out, docs)
    if orders["plain"] != list(range(len(docs))):
        hf_check.fail(f"--no-shuffle wrote the documents in order {orders['plain']}, expected "
                      "the input order")
    if orders["default"] == orders["plain"] or orders["default"] != orders["again"]:
        hf_check.fail(f"shuffled orders {orders['default']} and {orders['again']} (seed 1234 "
                      "twice): expected one order, not the input order")
    if orders["seed"] == orders["default"]:
        hf_check.fail(f"--seed 99 gave the order of seed 1234, {orders['seed']}")
    print(f"document orders: --no-shuffle {orders['plain']}, seed 1234 {orders['default']}, "
          f"seed 99 {orders['seed']}")


def check_trained_output(out, docs):
    """Checks one trained run's files; returns the input index of each document
    of the stream, in stream order."""
    with open(os.path.join(out, "data.json")) as f:
        meta = json.load(f)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    eos, pad = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|pad|>")
    want = {"format": "sdp-llmc-data", "version": 1, "vocab_size": tok.get_vocab_size(),
            "bos_token_id": eos, "eos_token_id": eos, "pad_token_id": pad,
            "tokenizer": "tokenizer.json"}
    if meta != want:
        hf_check.fail(f"data.json is {meta}, expected {want}")
    if not 300 <= meta["vocab_size"] <= 400:
        hf_check.fail(f"vocab_size {meta['vocab_size']}: expected the 256 bytes, the 2 special "
                      "tokens and merges, at most --vocab-size 400")

    names = sorted(f for f in os.listdir(out) if f.endswith(".bin"))
    train = [os.path.join(out, n) for n in names if n.startswith("text_train_")]
    val = [os.path.join(out, n) for n in names if n.startswith("text_val_")]
    if len(train) < 2 or len(val) != 1:
        hf_check.fail(f"shards {names}: expected several train shards (200 tokens each) and one val")
    for path in train + val:
        magic, version, count = header(path)
        if (magic, version) != (20240520, 1):
            hf_check.fail(f"{path}: magic {magic} version {version}, expected 20240520 1")
        if os.path.getsize(path) != 1024 + 2 * count:
            hf_check.fail(f"{path}: {os.path.getsize(path)} bytes for {count} uint16 tokens")
        if count > 200:
            hf_check.fail(f"{path}: {count} tokens > --shard-tokens 200")

    stream = np.concatenate([hf_check.llmc_tokens(train), hf_check.llmc_tokens(val)])
    n_val = len(hf_check.llmc_tokens(val))
    if n_val != round(0.1 * len(stream)):
        hf_check.fail(f"val holds {n_val} of {len(stream)} tokens, expected 10%")
    # eos + document, for each document, each input document once.
    starts = np.flatnonzero(stream == eos)
    if len(starts) != len(docs) or starts[0] != 0:
        hf_check.fail(f"eos at {starts.tolist()}: expected one before each of the {len(docs)} "
                      "documents, the first at 0")
    bounds = list(starts) + [len(stream)]
    order = []
    for i in range(len(docs)):
        ids = stream[bounds[i] + 1:bounds[i + 1]].tolist()
        text = tok.decode(ids, skip_special_tokens=False)
        if text not in docs:
            hf_check.fail(f"document {i} of the stream decodes to {text[:60]!r}..., which is "
                          "no input document")
        order.append(docs.index(text))
    if sorted(order) != list(range(len(docs))):
        hf_check.fail(f"the stream holds input documents {order}, expected each once")
    print(f"trained BPE: vocab {meta['vocab_size']}, {len(stream)} tokens, "
          f"{len(train)} train shards + 1 val, text round-trips")
    return order


def check_given_large_tokenizer(script, work):
    from tokenizers import Tokenizer, models, pre_tokenizers
    words = [f"w{i}" for i in range(70000 - 3)]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    tok_path = os.path.join(work, "big.json")
    tok.save(tok_path)
    text = os.path.join(work, "big.txt")
    with open(text, "w") as f:
        f.write("w0 w69996 w65535 w12\n")
    out = os.path.join(work, "big")
    prepare(script, "--out", out, "--tokenizer", tok_path, "--val-fraction", "0", "--name",
            "big", text)
    with open(os.path.join(out, "data.json")) as f:
        meta = json.load(f)
    want = {"vocab_size": 70000, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": None}
    got = {k: meta[k] for k in want}
    if got != want:
        hf_check.fail(f"data.json {got}, expected {want}")
    names = sorted(os.listdir(out))
    if names != ["big_train_000000.bin", "data.json", "tokenizer.json"]:
        hf_check.fail(f"files {names}: --val-fraction 0 writes no val shard")
    path = os.path.join(out, "big_train_000000.bin")
    magic, version, count = header(path)
    tokens = hf_check.llmc_tokens([path]).tolist()
    expected = [1, 3, 69999, 65538, 15, 2]
    if (magic, version) != (20240801, 7) or tokens != expected:
        hf_check.fail(f"magic {magic} version {version} tokens {tokens}, expected 20240801 7 "
                      f"{expected}")
    if os.path.getsize(path) != 1024 + 4 * count:
        hf_check.fail(f"{path}: not uint32 tokens")
    print("given tokenizer of 70000 entries: uint32 shards, <s> ... </s> per document")


def check_bad_input(script, work):
    text = os.path.join(work, "doc0.txt")
    cases = [
        (["--out", work, "--name", "interval", text], "--name 'interval' contains 'val'"),
        (["--out", work, os.path.join(work, "missing.txt")], "missing.txt' does not exist"),
        (["--out", work, "--vocab-size", "100", text], "--vocab-size 100 is invalid (valid: >= 258"),
        (["--out", work, "--val-fraction", "0.9", text], "--val-fraction 0.9 is invalid (valid: [0, 0.5])"),
        (["--out", work, "--seed", "-1", text], "--seed -1 is invalid (valid: an integer >= 0)"),
        (["--out", work, "--tokenizer", os.path.join(work, "big.json"), "--pad-token", "<pad>",
          text], "--pad-token '<pad>' is not a token of the tokenizer"),
    ]
    for args, message in cases:
        p = prepare(script, *args, expect_ok=False)
        if p.returncode != 2 or message not in p.stderr:
            hf_check.fail(f"{args}: exit {p.returncode}, stderr {p.stderr!r}; expected exit 2 "
                          f"and {message!r}")
    print(f"{len(cases)} bad inputs refused with their messages")


def main():
    script = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="sdp_hf_prepare-") as work:
        check_trained(script, work)
        check_given_large_tokenizer(script, work)
        check_bad_input(script, work)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
