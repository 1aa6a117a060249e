// Package adversary is ag's adversarial suite: hundreds of bad, huge and
// hostile inputs to the public API of core, nn and buffer, run on every
// backend that works here, each classified as handled (a clear error, a
// panic naming the function, the right value) or as a defect: a crash, a
// bare runtime panic, a silent wrong result, or data lost (a value computed
// before the case changed or became unreadable).
//
// Cases run in a child process per backend, so a crash is counted against
// the case that caused it and the rest still run. `go test -v -run
// TestAdversarial ./internal/adversary` prints one summary line per backend;
// any defect fails the test. FuzzOps drives random op sequences with random
// shapes, offsets and indices through the same classification.
package adversary
