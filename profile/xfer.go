package profile

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

type xferKey struct {
	dir  Dir
	site string
}

type xferCount struct {
	n     int
	bytes int64
}

// Xfer counts one host<->device transfer of bytes at site, when counting is
// on (see Count). A short or empty transfer still counts: the point is the
// number of trips, not only their size.
func Xfer(dir Dir, site string, bytes int) {
	if !counting.Load() {
		return
	}
	mu.Lock()
	k := xferKey{dir, site}
	c := st.xfer[k]
	if c == nil {
		c = &xferCount{}
		st.xfer[k] = c
	}
	c.n++
	c.bytes += int64(bytes)
	mu.Unlock()
}

// Launch counts n submissions to the device at site ("sync", "eager",
// "captured", ...). Launches are always counted, like ggmlR's
// .ag_launch: one map update per program run is noise next to a launch.
func Launch(site string, n int) {
	mu.Lock()
	st.launch[site] += n
	mu.Unlock()
}

// Launches returns a copy of the launch counts by site.
func Launches() map[string]int {
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(st.launch)
}

// ResetLaunches clears the launch counts.
func ResetLaunches() {
	mu.Lock()
	st.launch = map[string]int{}
	mu.Unlock()
}

// ResetXfer clears the transfer counts without switching counting.
func ResetXfer() {
	mu.Lock()
	st.resetXfer()
	mu.Unlock()
}

// XferSite is one row of the transfer table.
type XferSite struct {
	Dir   string `json:"dir"` // "up" or "down"
	Site  string `json:"site"`
	Count int    `json:"count"`
	Bytes int64  `json:"bytes"`
}

// Transfers is the transfer tally: rows by count, largest first, and totals.
type Transfers struct {
	// Counted is false when counting was never switched on.
	Counted   bool       `json:"counted"`
	Sites     []XferSite `json:"sites"`
	UpCount   int        `json:"up_count"`
	UpBytes   int64      `json:"up_bytes"`
	DownCount int        `json:"down_count"`
	DownBytes int64      `json:"down_bytes"`
}

// XferData returns the transfer tally.
func XferData() *Transfers {
	mu.Lock()
	defer mu.Unlock()
	return st.transfers()
}

func (s *state) transfers() *Transfers {
	t := &Transfers{Counted: s.xferEver, Sites: []XferSite{}}
	for k, c := range s.xfer {
		t.Sites = append(t.Sites, XferSite{Dir: k.dir.String(), Site: k.site, Count: c.n, Bytes: c.bytes})
		if k.dir == Up {
			t.UpCount += c.n
			t.UpBytes += c.bytes
		} else {
			t.DownCount += c.n
			t.DownBytes += c.bytes
		}
	}
	// By count, largest first; ties by "dir site", as the seed's order(-n)
	// over keys listed in sorted order.
	slices.SortFunc(t.Sites, func(a, b XferSite) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Dir, b.Dir), cmp.Compare(a.Site, b.Site))
	})
	return t
}

func mb(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// XferReport prints the transfer table like ag_xfer_report: dir, count, MB
// and site for at most n sites (n <= 0: all), then the up, down and TOTAL
// lines. It returns the tally, or nil (with the seed's message) when
// counting was never on or nothing was counted. A nil w prints nothing.
func XferReport(w io.Writer, n int) *Transfers {
	w = orDiscard(w)
	t := XferData()
	if !t.Counted {
		fmt.Fprintln(w, "XferReport: counting was never enabled.")
		return nil
	}
	if len(t.Sites) == 0 {
		fmt.Fprintln(w, "XferReport: no transfers recorded.")
		return nil
	}
	rule := strings.Repeat("-", 72)
	fmt.Fprintf(w, "\nHost<->device transfers\n%s\n", rule)
	fmt.Fprintf(w, "%-6s %8s %10s  %s\n", "dir", "count", "MB", "site")
	for i, s := range t.Sites {
		if n > 0 && i >= n {
			break
		}
		fmt.Fprintf(w, "%-6s %8d %10.2f  %s\n", s.Dir, s.Count, mb(s.Bytes), s.Site)
	}
	fmt.Fprintln(w, rule)
	fmt.Fprintf(w, "%-6s %8d %10.2f\n", "up", t.UpCount, mb(t.UpBytes))
	fmt.Fprintf(w, "%-6s %8d %10.2f\n", "down", t.DownCount, mb(t.DownBytes))
	fmt.Fprintf(w, "%-6s %8d %10.2f  TOTAL\n", "", t.UpCount+t.DownCount, mb(t.UpBytes+t.DownBytes))
	return t
}

// LaunchSite is one row of the launch table.
type LaunchSite struct {
	Site  string `json:"site"`
	Count int    `json:"count"`
}

// LaunchCounts are the launches by site, largest first, and their total.
type LaunchCounts struct {
	Sites []LaunchSite `json:"sites"`
	Total int          `json:"total"`
}

func (s *state) launches() *LaunchCounts {
	l := &LaunchCounts{Sites: []LaunchSite{}}
	for site, n := range s.launch {
		l.Sites = append(l.Sites, LaunchSite{site, n})
		l.Total += n
	}
	slices.SortFunc(l.Sites, func(a, b LaunchSite) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Site, b.Site))
	})
	return l
}

// LaunchReport prints the launch counts by site, largest first, and their
// total, and returns them. A nil w prints nothing.
func LaunchReport(w io.Writer) *LaunchCounts {
	w = orDiscard(w)
	mu.Lock()
	l := st.launches()
	mu.Unlock()
	fmt.Fprintf(w, "%8s  %s\n", "launches", "site")
	for _, s := range l.Sites {
		fmt.Fprintf(w, "%8d  %s\n", s.Count, s.Site)
	}
	fmt.Fprintf(w, "%8d  TOTAL\n", l.Total)
	return l
}
