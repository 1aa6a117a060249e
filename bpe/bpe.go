// Package bpe is GPT-2's byte-level byte-pair encoding: a Tokenizer maps
// any bytes to token ids and back. One is trained on a text (Train) or read
// from GPT-2's vocabulary and merges files (Read: encoder.json or Hugging
// Face's vocab.json, and merges.txt), and written in that format (Write).
//
// Text is first cut into pre-tokens by GPT-2's pattern (Split); within each,
// starting from its bytes, the learned merges are applied lowest rank
// first. Every byte is a token, so any input encodes, invalid UTF-8
// included, and decodes back to the same bytes.
package bpe

import (
	"bytes"
	"fmt"
)

// Tokenizer is a byte-level BPE vocabulary with its ranked merges. It is
// safe for concurrent use once made.
type Tokenizer struct {
	tokens [][]byte        // id -> bytes
	byteID [256]int        // the id of each single byte
	merges []Merge         // by rank
	rank   map[pair]rankTo // pair -> rank and result
	ids    map[string]int  // bytes -> id (the first id of those bytes)
}

// Merge is one learned merge: tokens A and B (ids), adjacent, become
// token To.
type Merge struct{ A, B, To int }

type pair struct{ a, b int32 }

type rankTo struct{ rank, to int32 }

// newTokenizer makes a Tokenizer of the given tokens (which must hold
// every single byte) and merges, checked.
func newTokenizer(fn string, tokens [][]byte, merges []Merge) (*Tokenizer, error) {
	t := &Tokenizer{tokens: tokens, merges: merges, rank: make(map[pair]rankTo, len(merges)), ids: make(map[string]int, len(tokens))}
	for i := range t.byteID {
		t.byteID[i] = -1
	}
	for id, tok := range tokens {
		if _, ok := t.ids[string(tok)]; !ok {
			t.ids[string(tok)] = id
		}
		if len(tok) == 1 && t.byteID[tok[0]] < 0 {
			t.byteID[tok[0]] = id
		}
	}
	for b, id := range t.byteID {
		if id < 0 {
			return nil, fmt.Errorf("bpe.%s: byte %#02x has no token: a byte-level vocabulary holds all 256", fn, b)
		}
	}
	for r, m := range merges {
		n := len(tokens)
		if m.A < 0 || m.A >= n || m.B < 0 || m.B >= n || m.To < 0 || m.To >= n {
			return nil, fmt.Errorf("bpe.%s: merge %d (%d %d -> %d) names a token outside 0..%d", fn, r, m.A, m.B, m.To, n-1)
		}
		if !bytes.Equal(tokens[m.To], append(append([]byte{}, tokens[m.A]...), tokens[m.B]...)) {
			return nil, fmt.Errorf("bpe.%s: merge %d makes %q of %q and %q", fn, r, tokens[m.To], tokens[m.A], tokens[m.B])
		}
		p := pair{int32(m.A), int32(m.B)}
		if _, ok := t.rank[p]; !ok { // the first of a repeated merge is the one that applies
			t.rank[p] = rankTo{int32(r), int32(m.To)}
		}
	}
	return t, nil
}

// Size is the number of tokens: ids are 0..Size()-1.
func (t *Tokenizer) Size() int { return len(t.tokens) }

// Merges returns the merges, by rank (the first applies first).
func (t *Tokenizer) Merges() []Merge { return append([]Merge(nil), t.merges...) }

// Token returns the bytes of token id, or nil when id is out of range.
func (t *Tokenizer) Token(id int) []byte {
	if id < 0 || id >= len(t.tokens) {
		return nil
	}
	return t.tokens[id]
}

// Encode maps text to token ids: each pre-token (Split) is encoded on its
// own, the merges applied by rank. A pre-token seen before in the same
// call is looked up, so text of a few megabytes takes seconds at most.
func (t *Tokenizer) Encode(text []byte) []int {
	var out []int
	seen := map[string][]int{}
	for _, p := range Split(text) {
		ids, ok := seen[string(p)]
		if !ok {
			ids = t.encodeWord(p)
			seen[string(p)] = ids
		}
		out = append(out, ids...)
	}
	return out
}

// encodeWord applies the merges to the bytes of one pre-token: the pair of
// lowest rank is merged everywhere, until no pair has a merge.
func (t *Tokenizer) encodeWord(w []byte) []int {
	syms := make([]int32, len(w))
	for i, c := range w {
		syms[i] = int32(t.byteID[c])
	}
	for len(syms) > 1 {
		best := rankTo{rank: -1}
		var bp pair
		for i := 0; i+1 < len(syms); i++ {
			p := pair{syms[i], syms[i+1]}
			if r, ok := t.rank[p]; ok && (best.rank < 0 || r.rank < best.rank) {
				best, bp = r, p
			}
		}
		if best.rank < 0 {
			break
		}
		j := 0
		for i := 0; i < len(syms); i++ {
			if i+1 < len(syms) && syms[i] == bp.a && syms[i+1] == bp.b {
				syms[j] = best.to
				i++
			} else {
				syms[j] = syms[i]
			}
			j++
		}
		syms = syms[:j]
	}
	ids := make([]int, len(syms))
	for i, s := range syms {
		ids[i] = int(s)
	}
	return ids
}

// Decode maps ids back to bytes; an id out of range is an error naming it
// and its place.
func (t *Tokenizer) Decode(ids []int) ([]byte, error) {
	var out []byte
	for i, id := range ids {
		if id < 0 || id >= len(t.tokens) {
			return nil, fmt.Errorf("bpe.Tokenizer.Decode: id %d at %d outside 0..%d", id, i, len(t.tokens)-1)
		}
		out = append(out, t.tokens[id]...)
	}
	return out, nil
}
