package app

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Inputs beyond numbers: a Param with Choices (a word out of a list), a
// StringParam (free text), a FileParam (a text file the model learns
// from) and a Checkpointer's save and load. A Spec that has any of them
// builds with BuildInput, which gets them all in an Input; Build sees only
// the numbers.

// StringParam is a setting of free text (a sample's prompt): natively a
// flag -NAME TEXT, in the page a text field.
type StringParam struct {
	Name    string `json:"name"`
	Default string `json:"default"`
	Doc     string `json:"doc"`
}

// FileParam is a text file the model reads (its training text, a
// tokenizer's vocabulary): natively a flag -NAME FILE whose contents Build
// gets, in the page a file picker, the Spec's first file also a drop zone.
// Not given, Build gets an empty File and picks its own default.
type FileParam struct {
	Name string `json:"name"`
	Doc  string `json:"doc"`
}

// File is the contents of a FileParam's file.
type File struct {
	Name string // the file's name (natively its path), "" when none was given
	Data []byte
}

// Input is what BuildInput gets: every Param's number (a Choices param's
// index), every Choices param's word, every StringParam's text and every
// FileParam's file, by name.
type Input struct {
	Config
	Choices map[string]string
	Strings map[string]string
	Files   map[string]File
}

// Choice returns the word of the Choices param name. It panics when the
// Spec has no such Param (a programming error in BuildInput).
func (in Input) Choice(name string) string {
	v, ok := in.Choices[name]
	if !ok {
		panic(fmt.Sprintf("app.Input.Choice: no parameter %q with choices", name))
	}
	return v
}

// String returns the StringParam name. It panics when the Spec has none.
func (in Input) String(name string) string {
	v, ok := in.Strings[name]
	if !ok {
		panic(fmt.Sprintf("app.Input.String: no string parameter %q", name))
	}
	return v
}

// File returns the file of the FileParam name (empty when none was
// given). It panics when the Spec has no such FileParam.
func (in Input) File(name string) File {
	v, ok := in.Files[name]
	if !ok {
		panic(fmt.Sprintf("app.Input.File: no file parameter %q", name))
	}
	return v
}

// Checkpointer is a Trainer that saves its state to a file and loads it
// back: natively the flags -save FILE (after training) and -load FILE
// (before it) of a Spec with Checkpoint set, in the page ag.save (the
// bytes the page downloads) and ag.load (the bytes of a file the user
// picked).
type Checkpointer interface {
	Save(w io.Writer) error
	Load(r io.Reader) error
}

// given holds what a build was asked for beyond the numbers.
type given struct {
	nums    map[string]float64
	choices map[string]string // word by Choices param, in place of a number
	strs    map[string]string
	files   map[string]File
}

// input checks g against the Spec and fills an Input with the defaults of
// what was not given.
func (s *Spec) input(g given) (Input, error) {
	nums := map[string]float64{}
	for k, v := range g.nums {
		nums[k] = v
	}
	for k, w := range g.choices {
		p, ok := s.param(k)
		if !ok || len(p.Choices) == 0 {
			return Input{}, fmt.Errorf("%s: unknown parameter %q with choices", s.Name, k)
		}
		i := slices.Index(p.Choices, w)
		if i < 0 {
			return Input{}, fmt.Errorf("%s: parameter %s %q: want one of %s", s.Name, k, w, strings.Join(p.Choices, ", "))
		}
		nums[k] = float64(i)
	}
	cfg, err := s.config(nums)
	if err != nil {
		return Input{}, err
	}
	in := Input{Config: cfg, Choices: map[string]string{}, Strings: map[string]string{}, Files: map[string]File{}}
	for _, p := range s.Params {
		if len(p.Choices) > 0 {
			in.Choices[p.Name] = p.Choices[cfg.Int(p.Name)]
		}
	}
	for _, p := range s.Strings {
		in.Strings[p.Name] = p.Default
	}
	for k, v := range g.strs {
		if !slices.ContainsFunc(s.Strings, func(p StringParam) bool { return p.Name == k }) {
			return Input{}, fmt.Errorf("%s: unknown string parameter %q", s.Name, k)
		}
		in.Strings[k] = v
	}
	for _, p := range s.Files {
		in.Files[p.Name] = File{}
	}
	for k, v := range g.files {
		if !slices.ContainsFunc(s.Files, func(p FileParam) bool { return p.Name == k }) {
			return Input{}, fmt.Errorf("%s: unknown file parameter %q", s.Name, k)
		}
		in.Files[k] = v
	}
	return in, nil
}

// names lists every input's name, for the reserved-name check.
func (s *Spec) inputNames() []string {
	var out []string
	for _, p := range s.Params {
		out = append(out, p.Name)
	}
	for _, p := range s.Strings {
		out = append(out, p.Name)
	}
	for _, p := range s.Files {
		out = append(out, p.Name)
	}
	return out
}

// ChoiceParam returns a Param whose value is one of words, def by default
// (see Param.Choices). It panics when def is not one of them.
func ChoiceParam(name, def, doc string, words ...string) Param {
	i := slices.Index(words, def)
	if i < 0 {
		panic(fmt.Sprintf("app.ChoiceParam %s: default %q is not one of %q", name, def, words))
	}
	return Param{Name: name, Default: float64(i), Min: 0, Max: float64(len(words) - 1), Int: true, Doc: doc, Choices: words}
}
