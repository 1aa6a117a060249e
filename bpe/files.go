package bpe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// GPT-2's files spell each byte as a printable character (its
// bytes_to_unicode): the printable bytes of Latin-1 as themselves, the
// other 68 as U+0100 onwards in byte order, so that ' ' is 'Ġ' and '\n'
// 'Ċ', and no token holds a space (merges.txt separates the two tokens of
// a merge by one).
var byteRune, runeByte = byteRunes()

func byteRunes() (to [256]rune, from map[rune]byte) {
	from = map[rune]byte{}
	n := 0
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			to[b] = rune(b)
		} else {
			to[b] = rune(256 + n)
			n++
		}
		from[to[b]] = byte(b)
	}
	return to, from
}

// spell writes b as GPT-2's files do.
func spell(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		s.WriteRune(byteRune[c])
	}
	return s.String()
}

// unspell reads a token as GPT-2's files write it.
func unspell(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := runeByte[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// Read reads GPT-2's tokenizer files: vocab, a JSON object from each token
// (spelled as GPT-2 spells bytes) to its id (encoder.json, or Hugging Face's
// vocab.json), and merges, merges.txt: an optional "#version" line, then one
// merge a line, the two tokens separated by a space, by rank. Ids must be
// 0..n-1 once each; every byte must be a token and every merge's two tokens
// and their concatenation too. GPT-2's <|endoftext|> is read as the token
// of those 13 bytes (Encode never makes it from text: text that spells it
// is encoded as other text).
func Read(vocab, merges io.Reader) (*Tokenizer, error) {
	var m map[string]int
	dec := json.NewDecoder(vocab)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("bpe.Read: vocabulary: %w", err)
	}
	tokens := make([][]byte, len(m))
	seen := make([]bool, len(m))
	for s, id := range m {
		if id < 0 || id >= len(m) || seen[id] {
			return nil, fmt.Errorf("bpe.Read: vocabulary: token %q has id %d: want ids 0..%d, each once", s, id, len(m)-1)
		}
		b, ok := unspell(s)
		if !ok {
			return nil, fmt.Errorf("bpe.Read: vocabulary: token %q (id %d) has a character that spells no byte", s, id)
		}
		tokens[id], seen[id] = b, true
	}
	var ms []Merge
	sc := bufio.NewScanner(merges)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimRight(sc.Text(), "\r")
		if line == 1 && strings.HasPrefix(l, "#version") || l == "" {
			continue
		}
		a, b, ok := strings.Cut(l, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return nil, fmt.Errorf("bpe.Read: merges line %d: %q: want two tokens separated by one space", line, l)
		}
		id := func(s string) (int, error) {
			v, ok := m[s]
			if !ok {
				return 0, fmt.Errorf("bpe.Read: merges line %d: %q: token %q is not in the vocabulary", line, l, s)
			}
			return v, nil
		}
		ia, err := id(a)
		if err != nil {
			return nil, err
		}
		ib, err := id(b)
		if err != nil {
			return nil, err
		}
		to, err := id(a + b)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Merge{ia, ib, to})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bpe.Read: merges: %w", err)
	}
	return newTokenizer("Read", tokens, ms)
}

// Write writes t as GPT-2's files (see Read): vocab a JSON object of the
// tokens in id order, merges a "#version: 0.2" line and the merges by rank.
// A token whose bytes another token of smaller id has already is refused
// (the JSON object would hold its key twice).
func (t *Tokenizer) Write(vocab, merges io.Writer) error {
	var b bytes.Buffer
	b.WriteString("{")
	for id, tok := range t.tokens {
		if first := t.ids[string(tok)]; first != id {
			return fmt.Errorf("bpe.Tokenizer.Write: tokens %d and %d are both %q: a vocabulary file holds each once", first, id, tok)
		}
		if id > 0 {
			b.WriteString(", ")
		}
		k, err := jsonString(spell(tok))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s: %d", k, id)
	}
	b.WriteString("}\n")
	if _, err := vocab.Write(b.Bytes()); err != nil {
		return fmt.Errorf("bpe.Tokenizer.Write: vocabulary: %w", err)
	}
	b.Reset()
	b.WriteString("#version: 0.2\n")
	for _, m := range t.merges {
		b.WriteString(spell(t.tokens[m.A]) + " " + spell(t.tokens[m.B]) + "\n")
	}
	if _, err := merges.Write(b.Bytes()); err != nil {
		return fmt.Errorf("bpe.Tokenizer.Write: merges: %w", err)
	}
	return nil
}

// jsonString quotes s as JSON without escaping <, > and & (GPT-2's
// "<|endoftext|>" stays readable).
func jsonString(s string) (string, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(s); err != nil {
		return "", fmt.Errorf("bpe.Tokenizer.Write: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
