//go:build linux

package cpu

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// hostMemory reads MemAvailable and MemTotal from /proc/meminfo: the CPU
// backend's device memory is the host's.
func hostMemory() (free, total uint64, err error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0, fmt.Errorf("cpu.Memory: %w", err)
	}
	defer f.Close()
	var haveFree, haveTotal bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch k {
		case "MemAvailable":
			dst, haveFree = &free, true
		case "MemTotal":
			dst, haveTotal = &total, true
		default:
			continue
		}
		fields := strings.Fields(v) // "12345 kB"
		if len(fields) == 0 {
			return 0, 0, fmt.Errorf("cpu.Memory: /proc/meminfo line %q", sc.Text())
		}
		n, perr := strconv.ParseUint(fields[0], 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("cpu.Memory: /proc/meminfo line %q: %w", sc.Text(), perr)
		}
		*dst = n * 1024
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("cpu.Memory: reading /proc/meminfo: %w", err)
	}
	if !haveFree || !haveTotal {
		return 0, 0, fmt.Errorf("cpu.Memory: /proc/meminfo lacks MemAvailable or MemTotal")
	}
	return free, total, nil
}
