#!/usr/bin/env python3
"""Turns text files into llm.c token shards that sdp-train reads (--data llmc:DIR/*.bin).

    BUILD/pyref/bin/python scripts/prepare_text_data.py --out DIR [--vocab-size V | --tokenizer FILE]
                                                        TEXT [TEXT ...]

Either trains a byte-level BPE tokenizer of --vocab-size entries on the files
(special tokens <|endoftext|>, the end and beginning of a document, and
<|pad|>) or uses the tokenizer.json given with --tokenizer. Every input file is
one document (--documents paragraphs: every run of text between blank lines).
The documents are shuffled first (a permutation drawn from --seed; --no-shuffle
keeps the order of the files and of the paragraphs in them), so the split and
the shards mix all inputs rather than following them one after the other: a
corpus of concatenated sources otherwise trains on the first ones and
validates on the last. The token stream puts the end-of-document token before
each document (when the tokenizer's beginning token is another one: that
before, the end token after), so documents are separated by it and the first
one starts after it too. The last --val-fraction of the stream is the
validation split. (sdp-train shuffles the windows it reads from the train
shards on its own as well: --shuffle.)

Writes into DIR:
  NAME_train_000000.bin, ...  llm.c shards of at most --shard-tokens tokens: a header of
  NAME_val_000000.bin         256 int32 (magic 20240520, version 1, token count) then uint16
                              tokens; magic 20240801, version 7, uint32 when vocab > 65535
  tokenizer.json              the tokenizer (copied into every checkpoint by sdp-train)
  data.json                   {"format": "sdp-llmc-data", "version": 1, "vocab_size": V,
                               "bos_token_id", "eos_token_id", "pad_token_id" (int or null),
                               "tokenizer": "tokenizer.json"}
Every file is written under a temporary name and renamed into place.
Run with the Python of setup-python-ref.sh (it has the tokenizers package).
"""
import argparse
import json
import os
import random
import re
import sys

import numpy as np

HEADER_INTS = 256
FORMATS = {2: (20240520, 1, np.uint16), 4: (20240801, 7, np.uint32)}
DEFAULT_EOS = "<|endoftext|>"
DEFAULT_PAD = "<|pad|>"
# Names the end / beginning token has in common tokenizers, tried in order
# when --eos-token / --bos-token are not given with --tokenizer.
EOS_CANDIDATES = ["<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"]
BOS_CANDIDATES = ["<|begin_of_text|>", "<s>", "<bos>"]
PAD_CANDIDATES = ["<|pad|>", "<pad>", "[PAD]"]


class InputError(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("texts", nargs="+", help="text files (UTF-8)")
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--name", default="text", help="shard name prefix (default: text)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--vocab-size", type=int, default=None,
                     help="train a byte-level BPE tokenizer of this many entries (default 1024)")
    src.add_argument("--tokenizer", help="use this tokenizer.json instead of training one")
    p.add_argument("--eos-token", help=f"end-of-document token (default {DEFAULT_EOS} when "
                   "training; with --tokenizer the first of " + ", ".join(EOS_CANDIDATES) +
                   " it has)")
    p.add_argument("--bos-token", help="beginning-of-document token (default: the end token "
                   "when training; with --tokenizer the first of " + ", ".join(BOS_CANDIDATES) +
                   " it has, else the end token)")
    p.add_argument("--pad-token", help=f"padding token (default {DEFAULT_PAD} when training; "
                   "with --tokenizer the first of " + ", ".join(PAD_CANDIDATES) +
                   " it has, else none); 'none' for none")
    p.add_argument("--documents", choices=["files", "paragraphs"], default="files",
                   help="what a document is: a whole file (default) or a paragraph")
    p.add_argument("--shuffle", action=argparse.BooleanOptionalAction, default=True,
                   help="shuffle the documents before they are tokenized, split and sharded "
                        "(default; --no-shuffle keeps the input order)")
    p.add_argument("--seed", type=int, default=1234,
                   help="seed of the document shuffle, >= 0 (default 1234)")
    p.add_argument("--val-fraction", type=float, default=0.05,
                   help="share of the token stream in the validation split, [0, 0.5] "
                        "(default 0.05; 0 writes no val shard)")
    p.add_argument("--shard-tokens", type=int, default=100_000_000,
                   help="tokens per shard at most (default 100000000)")
    args = p.parse_args(argv)
    if args.vocab_size is None and args.tokenizer is None:
        args.vocab_size = 1024
    return args


def check_args(args):
    if "val" in args.name:
        raise InputError(f"--name '{args.name}' contains 'val': sdp-train takes files whose name "
                         "contains 'val' for the validation split, so the train shards would be "
                         "read as validation (valid: a name without 'val')")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", args.name):
        raise InputError(f"--name '{args.name}' is invalid (valid: letters, digits, '.', '_', '-')")
    if not 0.0 <= args.val_fraction <= 0.5:
        raise InputError(f"--val-fraction {args.val_fraction} is invalid (valid: [0, 0.5])")
    if args.shard_tokens < 1:
        raise InputError(f"--shard-tokens {args.shard_tokens} is invalid (valid: >= 1)")
    if args.seed < 0:
        raise InputError(f"--seed {args.seed} is invalid (valid: an integer >= 0)")
    for path in args.texts:
        if not os.path.isfile(path):
            raise InputError(f"text file '{path}' does not exist")
    if args.tokenizer is not None and not os.path.isfile(args.tokenizer):
        raise InputError(f"--tokenizer '{args.tokenizer}' does not exist")


def read_documents(paths, mode):
    docs = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if mode == "files":
            docs.append(text)
        else:
            docs.extend(p for p in re.split(r"\n\s*\n", text) if p.strip())
    docs = [d for d in docs if d]
    if not docs:
        raise InputError("the text files hold no text (every file is empty)")
    return docs


def shuffle_documents(docs, seed):
    """The documents in a permutation drawn from seed (Python's Mersenne Twister
    from an integer seed: the same on every platform)."""
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    return [docs[i] for i in order]


def train_tokenizer(docs, vocab_size, specials):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    smallest = len(alphabet) + len(specials)
    if vocab_size < smallest:
        raise InputError(f"--vocab-size {vocab_size} is invalid (valid: >= {smallest}, the 256 "
                         f"bytes and the {len(specials)} special tokens)")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(docs, trainer=trainer)
    return tok


def token_id(tok, text, flag):
    if text is None:
        return None
    i = tok.token_to_id(text)
    if i is None:
        raise InputError(f"{flag} '{text}' is not a token of the tokenizer")
    return i


def first_present(tok, candidates):
    return next((c for c in candidates if tok.token_to_id(c) is not None), None)


def special_tokens(tok, args, trained):
    """(bos, eos, pad) token texts; pad may be None."""
    if trained:
        eos = args.eos_token or DEFAULT_EOS
        bos = args.bos_token or eos
        pad = args.pad_token or DEFAULT_PAD
    else:
        eos = args.eos_token or first_present(tok, EOS_CANDIDATES)
        if eos is None:
            raise InputError(f"--tokenizer '{args.tokenizer}' has none of the usual end tokens (" +
                             ", ".join(EOS_CANDIDATES) + "): name it with --eos-token")
        bos = args.bos_token or first_present(tok, BOS_CANDIDATES) or eos
        pad = args.pad_token or first_present(tok, PAD_CANDIDATES)
    if pad == "none":
        pad = None
    return bos, eos, pad


def token_stream(tok, docs, bos_id, eos_id):
    pieces = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        ids = np.asarray(enc.ids, dtype=np.int64)
        if bos_id == eos_id:
            pieces += [np.array([eos_id]), ids]
        else:
            pieces += [np.array([bos_id]), ids, np.array([eos_id])]
    return np.concatenate(pieces)


def write_atomically(path, write):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_shard(path, tokens, token_bytes):
    magic, version, dtype = FORMATS[token_bytes]
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = magic, version, len(tokens)

    def write(f):
        f.write(header.tobytes())
        f.write(tokens.astype(np.dtype(dtype).newbyteorder("<")).tobytes())
    write_atomically(path, write)


def write_shards(out, name, split, tokens, shard_tokens, token_bytes):
    paths = []
    for k, begin in enumerate(range(0, len(tokens), shard_tokens)):
        path = os.path.join(out, f"{name}_{split}_{k:06d}.bin")
        write_shard(path, tokens[begin:begin + shard_tokens], token_bytes)
        paths.append(path)
    return paths


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        check_args(args)
        docs = read_documents(args.texts, args.documents)
        if args.shuffle:
            docs = shuffle_documents(docs, args.seed)
        from tokenizers import Tokenizer
        if args.tokenizer:
            tok = Tokenizer.from_file(args.tokenizer)
            bos, eos, pad = special_tokens(tok, args, trained=False)
        else:
            names = [args.eos_token or DEFAULT_EOS, args.bos_token, args.pad_token or DEFAULT_PAD]
            specials = list(dict.fromkeys(t for t in names if t and t != "none"))
            tok = train_tokenizer(docs, args.vocab_size, specials)
            bos, eos, pad = special_tokens(tok, args, trained=True)
        bos_id = token_id(tok, bos, "--bos-token")
        eos_id = token_id(tok, eos, "--eos-token")
        pad_id = token_id(tok, pad, "--pad-token")
        vocab = tok.get_vocab_size(with_added_tokens=True)
        tokens = token_stream(tok, docs, bos_id, eos_id)
        if tokens.size and int(tokens.max()) >= vocab:
            raise InputError(f"the tokenizer produced id {int(tokens.max())} >= its vocabulary "
                             f"size {vocab}")
    except InputError as e:
        print(f"prepare_text_data: error: {e}", file=sys.stderr)
        return 2

    token_bytes = 2 if vocab <= 65535 else 4
    n_val = int(round(len(tokens) * args.val_fraction))
    if args.val_fraction > 0:
        n_val = max(n_val, 1)
    train, val = tokens[:len(tokens) - n_val], tokens[len(tokens) - n_val:]
    os.makedirs(args.out, exist_ok=True)
    for old in os.listdir(args.out):  # shards of an earlier run would join this one's glob
        if re.fullmatch(re.escape(args.name) + r"_(train|val)_\d{6}\.bin", old):
            os.remove(os.path.join(args.out, old))
    shards = write_shards(args.out, args.name, "train", train, args.shard_tokens, token_bytes)
    shards += write_shards(args.out, args.name, "val", val, args.shard_tokens, token_bytes)

    tok_json = tok.to_str()
    write_atomically(os.path.join(args.out, "tokenizer.json"),
                     lambda f: f.write(tok_json.encode("utf-8")))
    meta = {"format": "sdp-llmc-data", "version": 1, "vocab_size": vocab,
            "bos_token_id": bos_id, "eos_token_id": eos_id, "pad_token_id": pad_id,
            "tokenizer": "tokenizer.json"}
    write_atomically(os.path.join(args.out, "data.json"),
                     lambda f: f.write((json.dumps(meta, indent=2) + "\n").encode("utf-8")))
    order = f"shuffled (seed {args.seed})" if args.shuffle else "in input order"
    print(f"prepare_text_data: {len(docs)} documents {order}, {len(tokens)} tokens "
          f"({len(train)} train, {len(val)} val), vocab {vocab}, {len(shards)} shards of "
          f"{8 * token_bytes}-bit tokens in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
