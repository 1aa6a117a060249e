#!/usr/bin/python3
"""Writes the fixtures of package bpe's tests, from GPT-2's own code
(openai/gpt-2 src/encoder.py: bytes_to_unicode, the pre-tokenizing
pattern, bpe), restated here so that the expected answers come from
Python, not from the Go under test.

Run from this folder with Debian's python3 and python3-regex:
    /usr/bin/python3 make_fixture.py
It writes
  tiny_encoder.json, tiny_merges.txt: a small vocabulary in GPT-2's format
    (the 256 bytes in GPT-2's order, a few merges, <|endoftext|> last);
  cases.json: for each case string, GPT-2's pre-tokens and its encoding
    with the tiny vocabulary.
"""
import json

import regex as re


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, [chr(n) for n in cs]))


PAT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
B2U = bytes_to_unicode()

MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("Ġa", "n"), ("Ġan", "d"),
          ("o", "u"), ("Ġ", "Ġ"), ("ĠĠ", "ĠĠ"), ("Ċ", "Ċ"), ("1", "2"), ("Ã", "©"), ("in", "g"), ("e", "e"), ("ee", "e")]

CASES = [
    "the cat and the hat", "The keeper's lamp", "we'll go, they're here; I'd've", "'''s tricky", "don't DON'T",
    "  two spaces", "trailing spaces   ", "tabs\tand\nnewlines\n\nhere", "x \n y", "line\n  indented",
    "12345 and 3.14159", "café résumé naïve", "Ünïcödé ΑΒΓ абв", "emoji 😀 ok", "١٢٣ arabic digits", "½ Ⅻ",
    "a\u00a0b", "sep\x1cx", "a \x1cb", "a \x85b", "a \u200bb", "a \u2028b", "a\u00a0\u00a0b", "!!! ?? ...", " !", " ", "", "\n", "   ", "a  ", "eeee seeing", "ending\n",
]


def bpe(token, ranks):
    word = tuple(token)
    pairs = set(zip(word, word[1:]))
    if not pairs:
        return [token]
    while True:
        bigram = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if bigram not in ranks:
            break
        first, second = bigram
        new_word = []
        i = 0
        while i < len(word):
            try:
                j = word.index(first, i)
                new_word.extend(word[i:j])
                i = j
            except ValueError:
                new_word.extend(word[i:])
                break
            if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                new_word.append(first + second)
                i += 2
            else:
                new_word.append(word[i])
                i += 1
        word = tuple(new_word)
        if len(word) == 1:
            break
        pairs = set(zip(word, word[1:]))
    return list(word)


def main():
    encoder = {}
    for b in B2U:  # GPT-2's order: the printable bytes, then the rest
        encoder[B2U[b]] = len(encoder)
    for a, b in MERGES:
        encoder.setdefault(a + b, len(encoder))
    encoder["<|endoftext|>"] = len(encoder)
    with open("tiny_encoder.json", "w") as f:
        json.dump(encoder, f, ensure_ascii=False)
    with open("tiny_merges.txt", "w") as f:
        f.write("#version: 0.2\n" + "".join(a + " " + b + "\n" for a, b in MERGES))
    ranks = {m: i for i, m in enumerate(MERGES)}
    out = []
    for text in CASES:
        pieces = re.findall(PAT, text)
        ids = []
        for p in pieces:
            spelled = "".join(B2U[b] for b in p.encode("utf-8"))
            ids += [encoder[t] for t in bpe(spelled, ranks)]
        out.append({"text": text, "pieces": pieces, "ids": ids})
    with open("cases.json", "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
