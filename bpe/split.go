package bpe

import (
	"unicode"
	"unicode/utf8"
)

// Split cuts text into GPT-2's pre-tokens, the pieces BPE merges within
// (never across), as GPT-2's pattern does:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// tried in that order at each position: a space sticks to the word after
// it, and of a run of whitespace before a word all but the last character
// is one piece (the last is the word's space, or a piece of its own when
// it is not ' '). Go's regexp has no lookahead, so this is written out by
// hand. Whitespace is unicode.IsSpace, letters unicode.IsLetter, numbers
// unicode.IsNumber; a byte that is not valid UTF-8 counts as one
// character that is none of them, so the pieces always concatenate back to
// text, whatever its bytes. The pieces are subslices of text.
func Split(text []byte) [][]byte {
	var out [][]byte
	for i := 0; i < len(text); {
		n := piece(text[i:])
		out = append(out, text[i:i+n:i+n])
		i += n
	}
	return out
}

// class is a character's class in GPT-2's pattern.
type class int

const (
	other class = iota // [^\s\p{L}\p{N}], and bytes that are not UTF-8
	letter
	number
	space
)

// classAt decodes the character at the start of b: its class and length.
func classAt(b []byte) (class, int) {
	r, n := utf8.DecodeRune(b)
	switch {
	case r == utf8.RuneError && n <= 1:
		return other, max(n, 1)
	case unicode.IsLetter(r):
		return letter, n
	case unicode.IsNumber(r):
		return number, n
	case unicode.IsSpace(r):
		return space, n
	}
	return other, n
}

// run is the length of the characters of class c at the start of b.
func run(b []byte, c class) int {
	i := 0
	for i < len(b) {
		k, n := classAt(b[i:])
		if k != c {
			break
		}
		i += n
	}
	return i
}

// contractions are GPT-2's, tried first and case-sensitive as its pattern.
var contractions = []string{"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"}

// piece is the length of the pre-token at the start of b (len(b) > 0).
func piece(b []byte) int {
	if b[0] == '\'' {
		for _, c := range contractions {
			if len(b) >= len(c) && string(b[:len(c)]) == c {
				return len(c)
			}
		}
	}
	// " ?X+" for letters, numbers and the rest: the optional space first.
	start := 0
	if b[0] == ' ' && len(b) > 1 {
		if k, _ := classAt(b[1:]); k != space {
			start = 1
		}
	}
	k, _ := classAt(b[start:])
	if k != space {
		return start + run(b[start:], k)
	}
	// Whitespace: \s+(?!\S) takes the run but for its last character when
	// a non-space follows it, else the whole run; a run of one character
	// before a non-space is \s+ alone.
	n := run(b, space)
	if n == len(b) {
		return n
	}
	_, size := utf8.DecodeLastRune(b[:n])
	if last := n - size; last > 0 {
		return last
	}
	return n
}
