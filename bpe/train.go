package bpe

import (
	"container/heap"
	"fmt"
)

// Train learns a byte-level BPE of size tokens (at least 256) from text:
// ids 0..255 are the bytes, each later id the merge of the most frequent
// adjacent pair of tokens within the pre-tokens (Split) at that point,
// ties going to the pair of smaller ids (a merge whose bytes are
// already a token's makes that token). It stops early, with fewer than
// size tokens, when no pair occurs twice: a small text cannot fill a large
// vocabulary.
//
// The pair counts are kept up to date merge by merge (only the pre-tokens
// holding the merged pair are recounted, each distinct pre-token once,
// weighted by its count), so training costs about the text's length plus
// the work of the merges, not a pass over the text per merge.
func Train(text []byte, size int) (*Tokenizer, error) {
	if size < 256 {
		return nil, fmt.Errorf("bpe.Train: size %d, want >= 256 (every byte is a token)", size)
	}
	tokens := make([][]byte, 256, size)
	spelled := map[string]int32{}
	for b := range tokens {
		tokens[b] = []byte{byte(b)}
		spelled[string(tokens[b])] = int32(b)
	}
	// The distinct pre-tokens, as symbols, with their counts.
	index := map[string]int{}
	var words [][]int32
	var freq []int
	for _, p := range Split(text) {
		i, ok := index[string(p)]
		if !ok {
			i = len(words)
			index[string(p)] = i
			w := make([]int32, len(p))
			for j, c := range p {
				w[j] = int32(c)
			}
			words, freq = append(words, w), append(freq, 0)
		}
		freq[i]++
	}
	count := map[pair]int{}
	where := map[pair][]int32{} // the words that held the pair when it was counted (some may not now)
	for i, w := range words {
		for j := 0; j+1 < len(w); j++ {
			p := pair{w[j], w[j+1]}
			if count[p] == 0 {
				where[p] = append(where[p], int32(i))
			} else if l := where[p]; l[len(l)-1] != int32(i) {
				where[p] = append(where[p], int32(i))
			}
			count[p] += freq[i]
		}
	}
	h := &pairHeap{}
	for p, c := range count {
		*h = append(*h, counted{p, c})
	}
	heap.Init(h)
	var merges []Merge
	done := make([]int32, len(words)) // the last merge (1-based) that rewrote each word
	delta := map[pair]int{}           // how each recounted pair's count moved in this merge
	for len(tokens) < size && h.Len() > 0 {
		top := heap.Pop(h).(counted)
		if c := count[top.p]; c != top.n { // stale: push its count now
			if c > 0 {
				heap.Push(h, counted{top.p, c})
			}
			continue
		}
		if top.n < 2 {
			break
		}
		// Two merges may spell the same bytes ("ab c" and "a bc"): they
		// make the same token, as GPT-2's files can only say.
		joined := append(append([]byte{}, tokens[top.p.a]...), tokens[top.p.b]...)
		to, ok := spelled[string(joined)]
		if !ok {
			to = int32(len(tokens))
			tokens = append(tokens, joined)
			spelled[string(joined)] = to
		}
		merges = append(merges, Merge{int(top.p.a), int(top.p.b), int(to)})
		clear(delta)
		for _, wi := range where[top.p] {
			if done[wi] == int32(len(merges)) {
				continue
			}
			done[wi] = int32(len(merges))
			w, f := words[wi], freq[wi]
			if !holds(w, top.p) {
				continue
			}
			for j := 0; j+1 < len(w); j++ {
				p := pair{w[j], w[j+1]}
				count[p] -= f
				delta[p] -= f
			}
			k := 0
			for j := 0; j < len(w); j++ {
				if j+1 < len(w) && w[j] == top.p.a && w[j+1] == top.p.b {
					w[k] = to
					j++
				} else {
					w[k] = w[j]
				}
				k++
			}
			w = w[:k]
			words[wi] = w
			for j := 0; j+1 < len(w); j++ {
				p := pair{w[j], w[j+1]}
				count[p] += f
				delta[p] += f
				if p.a == to || p.b == to {
					if l := where[p]; len(l) == 0 || l[len(l)-1] != wi {
						where[p] = append(where[p], wi)
					}
				}
			}
		}
		delete(where, top.p)
		for p, d := range delta {
			// A count that fell is found stale when popped; one that rose
			// needs an entry now.
			switch c := count[p]; {
			case c == 0:
				delete(count, p)
			case d > 0:
				heap.Push(h, counted{p, c})
			}
		}
	}
	return newTokenizer("Train", tokens, merges)
}

// holds reports whether p occurs in w.
func holds(w []int32, p pair) bool {
	for j := 0; j+1 < len(w); j++ {
		if w[j] == p.a && w[j+1] == p.b {
			return true
		}
	}
	return false
}

// counted is a pair with its count when pushed.
type counted struct {
	p pair
	n int
}

// pairHeap pops the largest count first, ties to the smaller pair.
type pairHeap []counted

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].n != h[j].n {
		return h[i].n > h[j].n
	}
	if h[i].p.a != h[j].p.a {
		return h[i].p.a < h[j].p.a
	}
	return h[i].p.b < h[j].p.b
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(counted)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
