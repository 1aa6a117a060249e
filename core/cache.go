package core

import (
	"github.com/ag-go/ag/backend"
)

// Program cache. A lazy step is compiled once per graph structure and
// replayed from this cache; a model whose shapes keep changing (a new batch
// size every step) would otherwise grow it without bound, and each program
// holds its intermediates' memory. The cache is an LRU bounded by a count
// and by the device memory the programs report (backend.ProgramSizer);
// Device.SetProgramCache adjusts both.

// DefaultCachePrograms is the number of compiled programs a Device keeps.
// A training loop needs a handful (train step, eval step, a last partial
// batch, captures).
const DefaultCachePrograms = 64

// DefaultCacheShare is the share of the device's total memory that cached
// programs may hold (1/DefaultCacheShare).
const DefaultCacheShare = 4

// progEntry is one compiled program. refs counts its holders: the cache
// while the entry is in it, and each Capture recording that replays it; the
// program is released when the last one lets go.
type progEntry struct {
	key    string
	prog   backend.Program
	bytes  int64
	refs   int
	cached bool
	gen    int // backend instance that compiled it
	// origin maps the nodes of the graph compiled (composites expanded,
	// nodes of them) to the graph's (plan.Expand); nil when none was.
	origin     []int
	nodes      int
	planned    uint64 // the plan's intermediates, where prog reports no memory and a budget was set (SetMemoryBudget)
	cache      *progCache
	prev, next *progEntry
}

type progCache struct {
	maxProgs int
	maxBytes int64
	bytes    int64
	m        map[string]*progEntry
	head     progEntry // sentinel: head.next is the most recently used
	evicted  int
	// live holds every entry whose program is not released yet, cached or
	// only pinned by recordings: closing the backend releases them all.
	live map[*progEntry]struct{}
}

func (c *progCache) init(maxProgs int, maxBytes int64) {
	c.maxProgs, c.maxBytes = maxProgs, maxBytes
	c.m = map[string]*progEntry{}
	c.live = map[*progEntry]struct{}{}
	c.head.next, c.head.prev = &c.head, &c.head
}

func (c *progCache) unlink(e *progEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *progCache) front(e *progEntry) {
	e.next, e.prev = c.head.next, &c.head
	c.head.next.prev = e
	c.head.next = e
}

// get returns the entry for key, most recently used from now on.
func (c *progCache) get(key []byte) *progEntry {
	e := c.m[string(key)]
	if e != nil {
		c.unlink(e)
		c.front(e)
	}
	return e
}

// put adds a newly compiled program and evicts the least recently used
// others while the cache is over its bounds (the new one always stays).
func (c *progCache) put(key string, p backend.Program, gen int) *progEntry {
	var bytes int64
	if s, ok := p.(backend.ProgramSizer); ok {
		bytes = s.MemoryBytes()
	}
	e := &progEntry{key: key, prog: p, bytes: bytes, refs: 1, cached: true, gen: gen, cache: c}
	c.m[key] = e
	c.live[e] = struct{}{}
	c.front(e)
	c.bytes += bytes
	c.shrink(e)
	return e
}

// shrink evicts from the back while over bounds, never keep.
func (c *progCache) shrink(keep *progEntry) {
	for len(c.m) > 0 && (len(c.m) > c.maxProgs || c.bytes > c.maxBytes) {
		e := c.head.prev
		if e == keep {
			if e.prev == &c.head {
				return
			}
			e = e.prev
		}
		c.evict(e)
	}
}

func (c *progCache) evict(e *progEntry) {
	c.unlink(e)
	delete(c.m, e.key)
	c.bytes -= e.bytes
	e.cached = false
	c.evicted++
	e.unref()
}

// unref drops one holder and releases the program with the last.
func (e *progEntry) unref() {
	e.refs--
	if e.refs == 0 {
		e.release()
	}
}

func (e *progEntry) release() {
	if e.prog != nil {
		e.prog.Release()
		e.prog = nil
	}
	delete(e.cache.live, e)
}

// clear evicts everything and releases the programs that recordings still
// pin (the backend closes; their recordings record anew).
func (c *progCache) clear() {
	for c.head.next != &c.head {
		c.evict(c.head.next)
	}
	for e := range c.live {
		e.release()
	}
}

// SetProgramCache bounds the cache of compiled programs: at most programs
// entries holding at most bytes of device memory together (the most
// recently used program always stays). Zero or negative values restore the
// defaults: DefaultCachePrograms, and 1/DefaultCacheShare of the device's
// total memory. Stats counts the evictions.
func (d *Device) SetProgramCache(programs int, bytes int64) {
	d.lock()
	defer d.mu.Unlock()
	if programs <= 0 {
		programs = DefaultCachePrograms
	}
	if bytes <= 0 {
		bytes = d.defaultCacheBytes()
	}
	d.progs.maxProgs, d.progs.maxBytes = programs, bytes
	d.progs.shrink(nil)
}

// defaultCacheBytes is the default memory bound of the program cache.
// Called with d.mu held.
func (d *Device) defaultCacheBytes() int64 {
	const fallback = 1 << 30
	if d.be == nil {
		return fallback
	}
	_, total, err := d.be.Memory()
	if err != nil || total == 0 {
		return fallback
	}
	return int64(total / DefaultCacheShare)
}
