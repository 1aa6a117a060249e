package bpe_test

import (
	"bytes"
	"fmt"

	"github.com/ag-go/ag/bpe"
)

// ExampleTrain learns merges from a short text, encodes with them and
// decodes back; the tokens show what was learned.
func ExampleTrain() {
	tok, err := bpe.Train([]byte("the cat sat on the mat; the cat sat"), 300)
	if err != nil {
		panic(err)
	}
	ids := tok.Encode([]byte("the cat sat"))
	for _, id := range ids {
		fmt.Printf("%d %q\n", id, tok.Token(id))
	}
	back, _ := tok.Decode(ids)
	fmt.Println(tok.Size(), "tokens;", string(back))
	// Output:
	// 258 "the"
	// 262 " cat"
	// 263 " sat"
	// 264 tokens; the cat sat
}

// ExampleRead reads a vocabulary in GPT-2's format (here one written by
// Write; GPT-2's own encoder.json and merges.txt read the same way).
func ExampleRead() {
	tok, _ := bpe.Train([]byte("low lower lowest low"), 260)
	var vocab, merges bytes.Buffer
	if err := tok.Write(&vocab, &merges); err != nil {
		panic(err)
	}
	fmt.Print(merges.String())
	back, err := bpe.Read(&vocab, &merges)
	if err != nil {
		panic(err)
	}
	fmt.Println(back.Encode([]byte(" lowest")))
	// Output:
	// #version: 0.2
	// l o
	// lo w
	// Ġ low
	// Ġlow e
	// [259 115 116]
}
