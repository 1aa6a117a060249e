package goid

import (
	"sync"
	"testing"
)

func TestGetDistinguishesGoroutines(t *testing.T) {
	me := Get()
	if me == 0 || Get() != me {
		t.Fatalf("Get() = %#x then %#x: want one nonzero identity per goroutine", me, Get())
	}
	const n = 16
	ids := make([]uintptr, n)
	var got, done sync.WaitGroup
	release := make(chan struct{}) // all stay alive until checked, so no identity is reused
	for i := range n {
		got.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ids[i] = Get()
			got.Done()
			<-release
			if id := Get(); id != ids[i] {
				t.Errorf("goroutine %d: identity changed from %#x to %#x", i, ids[i], id)
			}
		}()
	}
	got.Wait()
	seen := map[uintptr]bool{me: true}
	for i, id := range ids {
		if id == 0 || seen[id] {
			t.Errorf("goroutine %d has identity %#x: zero, or taken by another live goroutine", i, id)
		}
		seen[id] = true
	}
	close(release)
	done.Wait()
}

func BenchmarkGet(b *testing.B) {
	for b.Loop() {
		_ = Get()
	}
}
