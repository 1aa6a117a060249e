package bpe

import (
	"bytes"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// fixtureCase is one case of testdata/cases.json, written by GPT-2's own
// code (testdata/make_fixture.py).
type fixtureCase struct {
	Text   string   `json:"text"`
	Pieces []string `json:"pieces"`
	IDs    []int    `json:"ids"`
}

func readCases(t *testing.T) []fixtureCase {
	t.Helper()
	b, err := os.ReadFile("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cs []fixtureCase
	if err := json.Unmarshal(b, &cs); err != nil {
		t.Fatal(err)
	}
	if len(cs) < 20 {
		t.Fatalf("%d cases in testdata/cases.json", len(cs))
	}
	return cs
}

func readTiny(t *testing.T) *Tokenizer {
	t.Helper()
	v, err := os.Open("testdata/tiny_encoder.json")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	m, err := os.Open("testdata/tiny_merges.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := Read(v, m)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestSplitMatchesGPT2 compares Split with GPT-2's pattern run by Python's
// regex module on the fixture's strings: contractions, spaces before
// words, runs of whitespace, Unicode letters and numbers, emoji.
func TestSplitMatchesGPT2(t *testing.T) {
	for _, c := range readCases(t) {
		var got []string
		for _, p := range Split([]byte(c.Text)) {
			got = append(got, string(p))
		}
		if !slices.Equal(got, c.Pieces) && !(len(got) == 0 && len(c.Pieces) == 0) {
			t.Errorf("Split(%q) = %q, GPT-2's %q", c.Text, got, c.Pieces)
		}
	}
}

// TestReadEncodesAsGPT2 reads the tiny vocabulary in GPT-2's format and
// encodes the fixture's strings: the ids must be those of GPT-2's bpe.
func TestReadEncodesAsGPT2(t *testing.T) {
	tok := readTiny(t)
	if tok.Size() != 256+17+1 {
		t.Errorf("Size %d, want 274 (256 bytes, 17 distinct merged tokens, <|endoftext|>)", tok.Size())
	}
	if got := string(tok.Token(tok.Size() - 1)); got != "<|endoftext|>" {
		t.Errorf("last token %q", got)
	}
	if got := string(tok.Token(0)); got != "!" { // GPT-2's order: printable bytes first
		t.Errorf("token 0 is %q, want %q", got, "!")
	}
	for _, c := range readCases(t) {
		got := tok.Encode([]byte(c.Text))
		if !slices.Equal(got, c.IDs) && !(len(got) == 0 && len(c.IDs) == 0) {
			t.Errorf("Encode(%q) = %v, GPT-2's %v", c.Text, got, c.IDs)
		}
		back, err := tok.Decode(got)
		if err != nil || string(back) != c.Text {
			t.Errorf("Decode(Encode(%q)) = %q, %v", c.Text, back, err)
		}
	}
}

// TestTrainSmall checks the merges of a text worked by hand:
// "aaabdaaabac" merges aa (4 times), then ab (twice, tied with aa·a and
// won by the smaller ids), then aa·ab; then no pair repeats and training
// stops short of the size asked.
func TestTrainSmall(t *testing.T) {
	tok, err := Train([]byte("aaabdaaabac"), 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := []Merge{{'a', 'a', 256}, {'a', 'b', 257}, {256, 257, 258}}
	if got := tok.Merges(); !slices.Equal(got, want) {
		t.Errorf("merges %v, want %v", got, want)
	}
	if tok.Size() != 259 || string(tok.Token(258)) != "aaab" {
		t.Errorf("size %d, token 258 %q", tok.Size(), tok.Token(258))
	}
	if got := tok.Encode([]byte("aaabdaaabac")); !slices.Equal(got, []int{258, 'd', 258, 'a', 'c'}) {
		t.Errorf("Encode: %v", got)
	}
	// Merges stay within pre-tokens: " aa" and "aa" are different words.
	tok, err = Train([]byte("ab ab ab"), 300)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range tok.Merges() {
		if a, b := tok.Token(m.A), tok.Token(m.B); bytes.HasSuffix(a, []byte("b")) && bytes.HasPrefix(b, []byte(" ")) {
			t.Errorf("merge %q + %q crosses a pre-token", a, b)
		}
	}
	if _, err := Train(nil, 255); err == nil || !strings.Contains(err.Error(), "size 255") {
		t.Errorf("Train size 255: %v", err)
	}
}

// TestRoundTripBytes encodes random bytes, invalid UTF-8 included, with a
// tokenizer trained on text, and decodes them back exactly.
func TestRoundTripBytes(t *testing.T) {
	tok, err := Train([]byte(strings.Repeat("the keeper's lamp, the keeper's light. ", 20)+"naïve café 123 456\n\n"), 400)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Size() <= 256 {
		t.Fatalf("no merges learned (size %d)", tok.Size())
	}
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 200 {
		b := make([]byte, n)
		for i := range b {
			if r.IntN(2) == 0 {
				b[i] = byte(r.IntN(256))
			} else {
				b[i] = "the keeper's \n\xff\xc3"[r.IntN(16)]
			}
		}
		ids := tok.Encode(b)
		back, err := tok.Decode(ids)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("Decode(Encode(%q)) = %q, %v", b, back, err)
		}
		var joined []byte
		for _, p := range Split(b) {
			joined = append(joined, p...)
		}
		if !bytes.Equal(joined, b) {
			t.Fatalf("Split(%q) joins to %q", b, joined)
		}
	}
	if _, err := tok.Decode([]int{1, tok.Size()}); err == nil || !strings.Contains(err.Error(), "at 1") {
		t.Errorf("Decode of an id out of range: %v", err)
	}
}

// TestWriteRead writes a trained tokenizer in GPT-2's format and reads it
// back: the same tokens, merges and encodings.
func TestWriteRead(t *testing.T) {
	text := []byte(strings.Repeat("Ünïcödé spaces  and\ttabs, we'll see 12 34 ", 10) + "\x00\x01 \xff\xfe")
	tok, err := Train(text, 320)
	if err != nil {
		t.Fatal(err)
	}
	var v, m bytes.Buffer
	if err := tok.Write(&v, &m); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.String(), "#version: 0.2\n") {
		t.Errorf("merges file starts %q", m.String()[:20])
	}
	back, err := Read(bytes.NewReader(v.Bytes()), bytes.NewReader(m.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Merges(), tok.Merges()) || back.Size() != tok.Size() {
		t.Fatalf("read back %d tokens, %d merges; wrote %d, %d", back.Size(), len(back.Merges()), tok.Size(), len(tok.Merges()))
	}
	if a, b := tok.Encode(text), back.Encode(text); !slices.Equal(a, b) {
		t.Errorf("encodings differ: %v and %v", a, b)
	}
}

// TestReadErrors: malformed files are errors naming the line or token.
func TestReadErrors(t *testing.T) {
	var v, m bytes.Buffer
	tok, err := Train([]byte("ab ab"), 300)
	if err != nil {
		t.Fatal(err)
	}
	if err := tok.Write(&v, &m); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ vocab, merges, want string }{
		{v.String(), m.String() + "a b c\n", "line 3"},
		{v.String(), m.String() + "x zz\n", `token "zz" is not in the vocabulary`},
		{`{"a": 0}`, "", "byte 0x00 has no token"},
		{`{"a": 0, "b": 0}`, "", "each once"},
		{`{"a b": 0}`, "", "spells no byte"},
		{`[1]`, "", "vocabulary"},
	} {
		_, err := Read(strings.NewReader(c.vocab), strings.NewReader(c.merges))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Read(..., %q): %v, want an error saying %q", c.merges, err, c.want)
		}
	}
}

// TestTrainGoSource trains on part of Go's own source tree and encodes it:
// the trainer's incremental counts and the encoder's cache keep both to
// seconds (logged, not asserted: the machine may be busy).
func TestTrainGoSource(t *testing.T) {
	var text []byte
	root := filepath.Join(runtime.GOROOT(), "src", "strings")
	files, _ := filepath.Glob(filepath.Join(root, "*.go"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text = append(text, b...)
	}
	if len(text) < 100_000 {
		t.Fatalf("only %d bytes of Go source under %s", len(text), root)
	}
	start := time.Now()
	tok, err := Train(text, 2000)
	if err != nil {
		t.Fatal(err)
	}
	trained := time.Since(start)
	start = time.Now()
	ids := tok.Encode(text)
	encoded := time.Since(start)
	if tok.Size() != 2000 {
		t.Errorf("size %d, want 2000", tok.Size())
	}
	back, err := tok.Decode(ids)
	if err != nil || !bytes.Equal(back, text) {
		t.Fatalf("round trip of %d bytes failed: %v", len(text), err)
	}
	if r := float64(len(text)) / float64(len(ids)); r < 2 {
		t.Errorf("%.2f bytes a token, want >= 2 with 2000 tokens on Go source", r)
	}
	t.Logf("%d bytes: trained 2000 tokens in %v, encoded in %v, %.2f bytes a token", len(text), trained, encoded, float64(len(text))/float64(len(ids)))
}

// naiveTrain is Train as its doc says, counting every pair afresh at each
// merge: the reference of the incremental counts.
func naiveTrain(text []byte, size int) []Merge {
	counts := map[string]int{}
	for _, p := range Split(text) {
		counts[string(p)]++
	}
	var words [][]int
	var freq []int
	for _, w := range slices.Sorted(maps.Keys(counts)) {
		var s []int
		for _, c := range []byte(w) {
			s = append(s, int(c))
		}
		words, freq = append(words, s), append(freq, counts[w])
	}
	tokens := map[string]int{}
	var spell []string
	for b := range 256 {
		tokens[string([]byte{byte(b)})] = b
		spell = append(spell, string([]byte{byte(b)}))
	}
	var merges []Merge
	for len(spell) < size {
		pc := map[[2]int]int{}
		for i, w := range words {
			for j := 0; j+1 < len(w); j++ {
				pc[[2]int{w[j], w[j+1]}] += freq[i]
			}
		}
		best, bn := [2]int{}, 0
		for p, n := range pc {
			if n > bn || n == bn && (p[0] < best[0] || p[0] == best[0] && p[1] < best[1]) {
				best, bn = p, n
			}
		}
		if bn < 2 {
			break
		}
		joined := spell[best[0]] + spell[best[1]]
		to, ok := tokens[joined]
		if !ok {
			to = len(spell)
			tokens[joined] = to
			spell = append(spell, joined)
		}
		merges = append(merges, Merge{best[0], best[1], to})
		for i, w := range words {
			var nw []int
			for j := 0; j < len(w); j++ {
				if j+1 < len(w) && w[j] == best[0] && w[j+1] == best[1] {
					nw = append(nw, to)
					j++
				} else {
					nw = append(nw, w[j])
				}
			}
			words[i] = nw
		}
	}
	return merges
}

// TestTrainMatchesNaive compares Train's incremental pair counts with a
// full recount at every merge, on English, Go and repetitive text
// (overlapping pairs such as "aaaa" included).
func TestTrainMatchesNaive(t *testing.T) {
	goSrc, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "strings", "strings.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range [][]byte{
		goSrc[:20000],
		[]byte(strings.Repeat("aaaa aaa aa a abab ababab bababa ", 30) + "the theme there then"),
		[]byte(strings.Repeat("the keeper's lamp burned; the keeper's light shone. ", 8)),
	} {
		want := naiveTrain(text, 500)
		tok, err := Train(text, 500)
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Merges(); !slices.Equal(got, want) {
			n := 0
			for n < min(len(got), len(want)) && got[n] == want[n] {
				n++
			}
			t.Errorf("%q...: %d merges, the recount's %d; first difference at %d", text[:20], len(got), len(want), n)
		}
	}
}
